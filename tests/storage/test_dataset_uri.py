"""POST /v1/datasets/register: a dataset read in place from an object-store URI on a real S3 server (moto), never
copied through the API; the service reads only under DATASET_URI_PREFIXES, with its own credentials, and says why
when it may not or cannot."""

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
