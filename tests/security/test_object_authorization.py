"""Object-level authorization: another key gets 404 on every route of an object it does not own, and learns
nothing about it; its lists hold none of them, its deletes and cancels touch none of them; an organisation's URI
prefixes and keys are its own.

The routes come from `app.routes`, so a new `{id}` route is in the matrix the day it is added (a new kind of
id, or a route that needs a body or a query parameter, fails here until it is given a sample in
tests/security/objects.py).
"""

from __future__ import annotations

import re

import pytest

from tests.security.conftest import bearer
from tests.security.objects import (  # noqa: F401 (fixtures)
    CORPUS,
    LOCATION_NAMES,
    OBJECT_STORE_PREFIXES,
    OBJECT_STORE_URIS,
    OPERATORS,
    PG_ENV,
    RECEIVER_URLS,
    SAMPLE_BODIES,
    SAMPLE_FILES,
    SAMPLE_QUERIES,
    SHARED_BUCKET,
    UNKNOWN_FIELDS,
    UPLOAD_ROUTES,
    make_alice_objects,
    v1_routes,
)


@pytest.fixture
def pg_env() -> dict[str, str]:
    return PG_ENV


@pytest.fixture
def alice_objects(pg_client):
    """Alice's objects (tests/security/objects.py)."""
    return make_alice_objects(pg_client)


def test_another_key_gets_404_on_every_id_route_and_learns_nothing(pg_client, alice_objects):
    """Bob calls every /v1 route with an `{id}` for Alice's objects: 404 each time, no trace of them in the body."""
    bob = bearer("bob")
    ids, secrets = alice_objects["ids"], alice_objects["secrets"]
    schema = pg_client.get("/openapi.json").json()["paths"]
    called = 0
    for method, path, route in v1_routes(pg_client.app):
        if "{" not in path or path.startswith(OPERATORS):
            continue
        names = re.findall(r"\{(\w+)(?::\w+)?\}", path)
        missing = [name for name in names if name not in ids]
        assert not missing, f"{method} {path} takes {missing}: give Alice an object for it in alice_objects"
        operation = schema.get(path, {}).get(method.lower(), {})
        required_query = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query" and p["required"]]
        needs_body = route.body_field is not None
        assert not needs_body or (method, path) in {**SAMPLE_BODIES, **SAMPLE_FILES}, (
            f"{method} {path}: add a valid body to SAMPLE_BODIES (SAMPLE_FILES for an upload)"
        )
        assert not required_query or (method, path) in SAMPLE_QUERIES, f"{method} {path}: add SAMPLE_QUERIES"
        url = path.format(**{name: ids[name] for name in names})
        response = pg_client.request(
            method,
            url,
            headers=bob,
            json=SAMPLE_BODIES.get((method, path)),
            files=SAMPLE_FILES.get((method, path)),
            params=SAMPLE_QUERIES.get((method, path)),
        )
        assert response.status_code == 404, (method, url, response.status_code, response.text)
        body = response.text
        leaked = [s for s in secrets if s in body and s not in url]  # the id bob asked for may be echoed back
        assert not leaked, f"{method} {path} told bob about {leaked}: {body}"
        called += 1
    assert called >= 15, f"only {called} id routes found: is the route enumeration broken?"


def test_another_keys_lists_hold_none_of_the_owners_objects(pg_client, alice_objects):
    bob = bearer("bob")
    for method, path, _route in v1_routes(pg_client.app):
        # compare is not a list: below
        if method != "GET" or "{" in path or path == "/v1/jobs/compare" or path.startswith(OPERATORS):
            continue
        response = pg_client.get(path, headers=bob)
        assert response.status_code == 200, (path, response.text)
        leaked = [s for s in alice_objects["secrets"] if s in response.text]
        assert not leaked, f"GET {path} lists {leaked} to bob: {response.text}"
    alices = alice_objects["ids"]["job_id"]
    compared = pg_client.get("/v1/jobs/compare", params={"ids": f"{alices},{alices[::-1]}"}, headers=bob)
    assert compared.status_code == 404, compared.text  # naming only the id bob asked for
    leaked = [s for s in alice_objects["secrets"] if s in compared.text and s != alices]
    assert not leaked, f"GET /v1/jobs/compare told bob about {leaked}: {compared.text}"


def test_the_owner_still_has_everything_after_the_other_keys_deletes_and_cancels(pg_client, alice_objects):
    """Bob's DELETE and cancel calls change nothing: Alice still reads all her objects, checkpoint included."""
    bob, alice, ids = bearer("bob"), alice_objects["headers"], alice_objects["ids"]
    for method, url in (
        ("DELETE", f"/v1/datasets/{ids['dataset_id']}"),
        ("DELETE", f"/v1/models/{ids['model_id']}"),
        ("DELETE", f"/v1/models/{ids['name']}@{ids['alias']}"),
        ("DELETE", f"/v1/models/{ids['name']}/aliases/{ids['alias']}"),
        ("DELETE", f"/v1/models/names/{ids['name']}?versions=delete"),
        ("DELETE", f"/v1/models/{ids['model_id']}?aliases=drop"),
        ("DELETE", f"/v1/jobs/{ids['job_id']}"),
        ("PUT", f"/v1/models/{ids['name']}/aliases/{ids['alias']}"),
        ("PATCH", f"/v1/models/{ids['name']}@1"),
        ("POST", f"/v1/jobs/{ids['job_id']}/cancel"),
    ):
        body = {"version": 1} if method == "PUT" else {"name": "bobs"} if method == "PATCH" else None
        assert pg_client.request(method, url, headers=bob, json=body).status_code == 404
    assert pg_client.get(f"/v1/datasets/{ids['dataset_id']}", headers=alice).status_code == 200
    by_alias = pg_client.get(f"/v1/models/{ids['name']}@{ids['alias']}", headers=alice).json()
    assert (by_alias["id"], by_alias["name"], by_alias["version"]) == (ids["model_id"], ids["name"], 1)
    assert pg_client.get(f"/v1/models/{ids['model_id']}", headers=alice).json()["id"] == ids["model_id"]
    assert pg_client.get(f"/v1/pings/{ids['ping_id']}", headers=alice).status_code == 200
    job = pg_client.get(f"/v1/jobs/{ids['job_id']}", headers=alice).json()
    assert job["status"] == "queued" and job["cancel_requested"] is False
    checkpoints = pg_client.get(f"/v1/jobs/{ids['job_id']}/checkpoints", headers=alice).json()
    assert [c["sha256"] for c in checkpoints] == ["c" * 64]
    assert all("storage_key" not in c and "path" not in c for c in checkpoints), "a storage location left the server"
    (line,) = pg_client.get(f"/v1/jobs/{ids['job_id']}/logs", headers=alice).json()["lines"]
    assert line["message"].endswith("alice-secret-log-line")  # what bob never saw
    memory = pg_client.get(f"/v1/jobs/{ids['job_id']}/memory", headers=alice).json()
    assert memory["error"] == "alice-memory-report"


def test_an_organisations_uri_prefixes_are_its_own(pg_client, alice_objects):
    """Fault: one allow-list for every organisation: bob registers a dataset from the prefix alice keeps her corpora
    under. Pass: alice's admin narrowed her organisation's list; bob's admin narrows his own: bob's refusal names only
    his list, bob's list changes nothing of alice's, and neither may reach past DATASET_URI_PREFIXES."""
    route = "/v1/organisation/dataset-uri-prefixes"
    alice, bob = alice_objects["headers"], bearer("bob")
    assert pg_client.get(route, headers=bob).json() == {
        "installation": [f"{SHARED_BUCKET}/"],
        "organisation": None,
        "effective": [f"{SHARED_BUCKET}/"],
    }
    mine = pg_client.put(route, headers=bob, json={"prefixes": [f"{SHARED_BUCKET}/bob"]})
    assert mine.status_code == 200 and mine.json()["effective"] == [f"{SHARED_BUCKET}/bob/"]
    uri = f"{SHARED_BUCKET}/alice-secret-corpora/wmt.tsv"
    response = pg_client.post(
        "/v1/datasets/register", headers=bob, json={"name": "theirs", "kind": "parallel", "uri": uri}
    )
    assert response.status_code == 422, response.text
    message = response.json()["detail"][0]["msg"]
    assert f"may not read {uri!r}: it reads only URIs under {SHARED_BUCKET}/bob/ (the organisation's own" in message
    assert message.count("alice-secret-corpora") == 1  # the URI bob gave, nothing of alice's list
    outside = pg_client.put(route, headers=bob, json={"prefixes": ["s3://shared-corpora-2/alice"]})
    assert outside.status_code == 422 and "is not within the service's DATASET_URI_PREFIXES" in outside.text
    assert pg_client.get(route, headers=alice).json()["organisation"] == [f"{SHARED_BUCKET}/alice-secret-corpora/"]


def test_another_organisations_keys_revoke_none_of_the_owners_keys_and_learn_nothing_of_their_scopes(
    pg_client, alice_objects
):
    """A revocation by a key without scope admin compares the scopes of the key it revokes with its own (403 naming
    those it lacks): only for its own member's keys. Bob's read-only key, as his admin key, gets 404 naming only the
    id for Alice's admin key and her robot's read-only one, which go on working."""
    alice, ids = alice_objects["headers"], alice_objects["ids"]
    bob = bearer("bob")
    bob_read = pg_client.post("/v1/keys", headers=bob, json={"name": "bob-read", "scopes": ["read"]}).json()
    alices_own = next(k for k in pg_client.get("/v1/keys", headers=alice).json()["data"] if k["member"] == "alice")
    for headers in (bob, {"Authorization": f"Bearer {bob_read['key']}"}):
        for key_id in (alices_own["id"], ids["key_id"]):
            response = pg_client.delete(f"/v1/keys/{key_id}", headers=headers)
            assert response.status_code == 404 and response.json() == {"detail": f"API key {key_id} not found"}
    assert pg_client.get("/v1/members", headers=alice).status_code == 200
    listed = {k["id"]: k["revoked_at"] for k in pg_client.get("/v1/keys", headers=alice).json()["data"]}
    assert listed[alices_own["id"]] is None and listed[ids["key_id"]] is None
