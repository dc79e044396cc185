"""POST /v1/datasets/register: a dataset read in place from an object-store URI on a real S3 server (moto), never
copied through the API; the service reads only under DATASET_URI_PREFIXES, compared segment by segment, and the
organisation's own narrower list, with its own credentials, and says why when it may not or cannot."""

from __future__ import annotations

import gzip

import pytest

from tests.support.api_app import migrated_client

PAIRS = "".join(f"source {i}\ttarget {i}\n" for i in range(300)).encode()


@pytest.fixture
def api(settings_env, s3_server):
    bucket = s3_server.bucket_name()
    s3_server.client().create_bucket(Bucket=bucket)
    settings_env(**s3_server.env, DATASET_URI_PREFIXES=f"s3://{bucket}/corpora/")
    from app.db.keys import create_key
    from app.db.session import session_scope

    with migrated_client() as client:
        with session_scope() as session:
            _row, clear = create_key(session, "alice")
        yield client, {"Authorization": f"Bearer {clear}"}, bucket, s3_server.client()


def _register(client, headers, uri, **extra):
    return client.post(
        "/v1/datasets/register", headers=headers, json={"name": "wmt", "kind": "parallel", "uri": uri, **extra}
    )


def test_a_registered_uri_is_parsed_in_place_and_trains_from_there(api):
    from worker.data.ingest import process
    from worker.training.job_data import read_rows

    client, headers, bucket, s3 = api
    data = gzip.compress(PAIRS)
    s3.put_object(Bucket=bucket, Key="corpora/wmt.tsv.gz", Body=data)
    response = _register(client, headers, f"s3://{bucket}/corpora/wmt.tsv.gz", source_language="en")
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["status"], body["source_uri"], body["size_bytes"]) == (
        "processing",
        f"s3://{bucket}/corpora/wmt.tsv.gz",
        len(data),
    )
    assert process(body["id"]) == "ready"
    ready = client.get(f"/v1/datasets/{body['id']}", headers=headers).json()
    assert (ready["rows"], ready["format"], ready["compression"], ready["source_language"]) == (
        300,
        "tsv",
        "gzip",
        "en",
    )
    import hashlib

    assert ready["sha256"] == hashlib.sha256(data).hexdigest()
    from app.db.session import session_scope
    from app.db.tables import Dataset

    with session_scope() as session:
        dataset = session.get(Dataset, body["id"])
        session.expunge(dataset)
    assert dataset.storage_key == ""  # nothing was copied into the artifact store
    assert read_rows(dataset)[:2] == [("source 0", "target 0"), ("source 1", "target 1")]
    assert client.delete(f"/v1/datasets/{body['id']}", headers=headers).status_code == 204
    assert s3.head_object(Bucket=bucket, Key="corpora/wmt.tsv.gz")["ContentLength"] == len(data)  # not ours to delete


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("s3://{bucket}/private/wmt.tsv", "may not read"),  # outside DATASET_URI_PREFIXES
        ("s3://other-bucket-x/corpora/wmt.tsv", "may not read"),
        ("https://example.com/wmt.tsv", "not an s3://bucket/key URI"),
        ("file:///etc/passwd", "not an s3://bucket/key URI"),
        ("/etc/passwd", "not an s3://bucket/key URI"),
        ("s3://{bucket}/corpora/missing.tsv", "does not exist"),
        ("s3://{bucket}/corpora/", "not an s3://bucket/key URI of one object"),
    ],
)
def test_a_uri_the_service_may_not_or_cannot_read_is_422_naming_it(api, uri, message):
    client, headers, bucket, _s3 = api
    response = _register(client, headers, uri.format(bucket=bucket))
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "uri"] and message in detail["msg"]
    assert client.get("/v1/datasets", headers=headers).json()["total"] == 0


def test_a_bucket_the_server_does_not_have_is_named(api, settings_env, s3_server):
    client, headers, _bucket, _s3 = api
    settings_env(**s3_server.env, DATASET_URI_PREFIXES="s3://")  # every URI allowed: the HEAD decides
    response = _register(client, headers, "s3://no-such-bucket-here/corpora/x.tsv")
    assert response.status_code == 422  # a HEAD answers 404 with no body: a missing bucket reads as a missing object
    assert "s3://no-such-bucket-here/corpora/x.tsv does not exist" in response.json()["detail"][0]["msg"]


def test_no_uri_may_be_registered_by_default(settings_env, s3_server):
    settings_env(**s3_server.env)
    from app.db.keys import create_key
    from app.db.session import session_scope

    with migrated_client() as client:
        with session_scope() as session:
            _row, clear = create_key(session, "alice")
        response = _register(client, {"Authorization": f"Bearer {clear}"}, "s3://corpora/wmt.tsv")
    assert response.status_code == 422
    assert "DATASET_URI_PREFIXES is empty" in response.json()["detail"][0]["msg"]


def _key(owner: str, member: str | None = None, role: str | None = None) -> dict[str, str]:
    from app.db.keys import create_key
    from app.db.session import session_scope

    with session_scope() as session:
        _row, clear = create_key(session, member or owner, owner, member_name=member, role=role)
    return {"Authorization": f"Bearer {clear}"}


def test_a_prefix_allows_whole_segments_only_and_refuses_dot_segments_and_encodings(settings_env, s3_server):
    """Fault: DATASET_URI_PREFIXES=s3://BUCKET/data, compared as a string, let a key read s3://BUCKET/database/...
    and s3://BUCKET-other/... (a bucket whose name begins the same), and data/../ or an encoded one. Pass: only the
    objects under the segment `data` of that bucket are read; the others are 422 naming the URI and why."""
    bucket = s3_server.bucket_name()
    s3 = s3_server.client()
    for name in (bucket, f"{bucket}-other"):
        s3.create_bucket(Bucket=name)
        for key in ("data/wmt.tsv", "database/wmt.tsv", "data", "data-2024/wmt.tsv"):
            s3.put_object(Bucket=name, Key=key, Body=PAIRS)
    settings_env(**s3_server.env, DATASET_URI_PREFIXES=f"s3://{bucket}/data")
    with migrated_client() as client:
        headers = _key("acme")
        for uri in (f"s3://{bucket}/data/wmt.tsv", f"s3://{bucket}/data"):
            assert _register(client, headers, uri).status_code == 201, uri
        for uri, says in (
            (f"s3://{bucket}/database/wmt.tsv", "may not read"),
            (f"s3://{bucket}/data-2024/wmt.tsv", "may not read"),
            (f"s3://{bucket}-other/data/wmt.tsv", "may not read"),
            (f"s3://{bucket}/data/../database/wmt.tsv", "has a '..' segment"),
            (f"s3://{bucket}/data/%2e%2e/database/wmt.tsv", "holds '%'"),
            (f"s3://{bucket}/data%2f..%2fdatabase/wmt.tsv", "holds '%'"),
            (f"s3://{bucket}/data//wmt.tsv", "has an empty segment"),
        ):
            response = _register(client, headers, uri)
            assert response.status_code == 422, (uri, response.text)
            (detail,) = response.json()["detail"]
            assert detail["loc"] == ["body", "uri"] and says in detail["msg"] and repr(uri) in detail["msg"], detail
        assert f"under s3://{bucket}/data/" in _register(client, headers, f"s3://{bucket}/database/wmt.tsv").text
        assert client.get("/v1/datasets", headers=headers).json()["total"] == 2


def test_an_organisation_reads_only_under_its_own_list_within_the_services(settings_env, s3_server):
    """Fault: one allow-list for every organisation: acme's key reads the objects globex keeps under the shared
    bucket. Pass: each organisation's admin narrows DATASET_URI_PREFIXES for their organisation; acme then reads
    only under its own prefix and globex only under its own, each refusal naming only the caller's list; a prefix
    outside DATASET_URI_PREFIXES is refused; null gives the organisation all of DATASET_URI_PREFIXES again."""
    bucket = s3_server.bucket_name()
    s3 = s3_server.client()
    s3.create_bucket(Bucket=bucket)
    for key in ("acme/wmt.tsv", "globex/wmt.tsv"):
        s3.put_object(Bucket=bucket, Key=key, Body=PAIRS)
    settings_env(**s3_server.env, DATASET_URI_PREFIXES=f"s3://{bucket}/")
    route = "/v1/organisation/dataset-uri-prefixes"
    with migrated_client() as client:
        acme, globex = _key("acme"), _key("globex")
        acme_member = _key("acme", member="acme-dev", role="member")
        assert client.get(route, headers=acme_member).json() == {
            "installation": [f"s3://{bucket}/"],
            "organisation": None,
            "effective": [f"s3://{bucket}/"],
        }
        refused = client.put(route, headers=acme_member, json={"prefixes": [f"s3://{bucket}/globex"]})
        assert refused.status_code == 403 and "lacks scope 'admin'" in refused.text  # a member may not widen it back
        narrowed = client.put(route, headers=acme, json={"prefixes": [f"s3://{bucket}/acme"]})
        assert narrowed.status_code == 200, narrowed.text
        assert narrowed.json()["organisation"] == narrowed.json()["effective"] == [f"s3://{bucket}/acme/"]
        assert client.put(route, headers=globex, json={"prefixes": [f"s3://{bucket}/globex/"]}).status_code == 200
        outside = client.put(route, headers=acme, json={"prefixes": [f"s3://{bucket}/acme", "s3://elsewhere/x"]})
        assert outside.status_code == 422, outside.text
        (detail,) = outside.json()["detail"]
        assert detail["loc"] == ["body", "prefixes", "1"]
        assert "'s3://elsewhere/x' is not within the service's DATASET_URI_PREFIXES" in detail["msg"]

        assert _register(client, acme, f"s3://{bucket}/acme/wmt.tsv").status_code == 201
        assert _register(client, globex, f"s3://{bucket}/globex/wmt.tsv").status_code == 201
        for headers, theirs, ours in ((acme, "globex", "acme"), (globex, "acme", "globex")):
            response = _register(client, headers, f"s3://{bucket}/{theirs}/wmt.tsv")
            assert response.status_code == 422, response.text
            message = response.json()["detail"][0]["msg"]
            assert f"may not read 's3://{bucket}/{theirs}/wmt.tsv'" in message
            assert f"under s3://{bucket}/{ours}/ (the organisation's own list" in message
            assert f"{bucket}/{theirs}/ " not in message and f"{bucket}/{theirs}/," not in message

        nowhere = client.put(route, headers=acme, json={"prefixes": []})
        assert nowhere.json() == {"installation": [f"s3://{bucket}/"], "organisation": [], "effective": []}
        assert "none (the organisation's own list" in _register(client, acme, f"s3://{bucket}/acme/wmt.tsv").text
        again = client.put(route, headers=acme, json={"prefixes": None})
        assert again.json()["organisation"] is None and again.json()["effective"] == [f"s3://{bucket}/"]
        assert _register(client, acme, f"s3://{bucket}/globex/wmt.tsv").status_code == 201  # the installation's
        audit = client.get("/v1/audit", headers=acme, params={"action": "organisation.uri_prefixes_changed"}).json()
        assert [event["details"]["to"] for event in audit["data"]] == [None, [], [f"s3://{bucket}/acme/"]]


def test_a_narrower_installation_list_narrows_every_organisations(settings_env, s3_server):
    """An organisation's stored list never reaches past DATASET_URI_PREFIXES as it is now: an operator who narrows it
    narrows every organisation at once."""
    bucket = s3_server.bucket_name()
    s3_server.client().create_bucket(Bucket=bucket)
    s3_server.client().put_object(Bucket=bucket, Key="acme/old/wmt.tsv", Body=PAIRS)
    settings_env(**s3_server.env, DATASET_URI_PREFIXES=f"s3://{bucket}/")
    with migrated_client() as client:
        acme = _key("acme")
        route = "/v1/organisation/dataset-uri-prefixes"
        assert client.put(route, headers=acme, json={"prefixes": [f"s3://{bucket}/acme"]}).status_code == 200
    settings_env(**s3_server.env, DATASET_URI_PREFIXES=f"s3://{bucket}/acme/new")
    with migrated_client() as client:
        assert client.get(route, headers=acme).json() == {
            "installation": [f"s3://{bucket}/acme/new/"],
            "organisation": [f"s3://{bucket}/acme/"],
            "effective": [f"s3://{bucket}/acme/new/"],
        }
        response = _register(client, acme, f"s3://{bucket}/acme/old/wmt.tsv")
        assert response.status_code == 422 and "may not read" in response.text
