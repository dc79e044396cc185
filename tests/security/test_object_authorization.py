"""Object-level authorization: another key gets 404 on every route of an object it does not own, and learns
nothing about it; request bodies cannot smuggle ownership, status or storage locations; no route takes a path.

The routes come from `app.routes`, so a new `{id}` route is in the matrix the day it is added (a new kind of
id, or a route that needs a body or a query parameter, fails here until it is given a sample).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from tests.security.conftest import bearer
from tests.security.rows import insert_job_outputs, insert_tiny_model

CORPUS = "".join(json.dumps({"source": f"{n} pears", "target": f"{n} Birnen"}) + "\n" for n in range(30)).encode()
# Valid bodies and required query parameters, so that a 404 is the ownership check and not a 422.
SAMPLE_BODIES = {
    ("POST", "/v1/models/{model_id}/translate"): {"texts": ["one pear"]},
    ("POST", "/v1/models/{model_id}/fill-mask"): {"text": "one <mask>"},
    ("POST", "/v1/models/{model_id}/attention"): {"text": "one pear"},
    ("POST", "/v1/models/{model_id}/evaluations"): {"dataset_id": "00000000-0000-0000-0000-000000000000"},
    ("POST", "/v1/models/{model_id}/dataset-translations"): {"dataset_id": "00000000-0000-0000-0000-000000000000"},
    ("PATCH", "/v1/jobs/{job_id}"): {"name": "pears", "tags": ["fruit"]},
    ("PATCH", "/v1/models/{model_id}"): {"name": "pears", "tags": ["fruit"], "description": "pears"},
    ("PUT", "/v1/models/{name}/aliases/{alias}"): {"version": 1},
    ("PATCH", "/v1/webhooks/{webhook_id}"): {"events": ["job.failed"], "enabled": False},
    ("POST", "/v1/datasets/{dataset_id}/filter"): {"rules": {"deduplicate": True}},
    ("PATCH", "/v1/members/{member_id}"): {"role": "viewer"},
    ("PATCH", "/v1/keys/{key_id}"): {"rate_limit_per_minute": 1000},
    ("POST", "/v1/models/{model_id}/corrections"): {
        "source": "one pear",
        "translation": "x",
        "corrected": "eine Birne",
    },
    ("POST", "/v1/models/{model_id}/adaptations"): {"max_minutes": 1},
}
# Routes that take a multipart upload: their sample files (a dataset upload has its own tests below).
SAMPLE_FILES = {("POST", "/v1/models/{model_id}/translations"): {"file": ("pears.txt", b"one pear\n")}}
UPLOAD_ROUTES = {"/v1/datasets", "/v1/models/import", "/v1/models/{model_id}/translations"}
SAMPLE_QUERIES = {("GET", "/v1/models/{model_id}/neighbors"): {"token": "pear"}}
UNKNOWN_FIELDS = ("status", "owner", "owner_id", "storage_key")
# Names of parameters or body fields that would let a client point the server at a file or a location.
LOCATION_NAMES = {
    "path",
    "file_path",
    "filepath",
    "dir",
    "directory",
    "storage_key",
    "checkpoint_path",
    "model_path",
    "artifact_root",
    "url",
    "uri",
    "location",
    "filename",
    "prefixes",
}
# A webhook endpoint's URL is where the service sends its owner's events: it names a receiver, never a file, and is
# refused unless it is an http(s) URL of a public host (app/services/webhook_http.py, tests/test_webhook_http.py).
RECEIVER_URLS = {("POST", "/v1/webhooks"), ("PATCH", "/v1/webhooks/{webhook_id}")}
# A dataset registered from object storage names its s3:// URI: read only under the operator's DATASET_URI_PREFIXES
# and the organisation's own narrower list, segment by segment, with the service's credentials, never a file of the
# server (tests/storage/test_dataset_uri.py, tests/test_object_uris.py).
OBJECT_STORE_URIS = {("POST", "/v1/datasets/register")}
# That list: prefixes within DATASET_URI_PREFIXES (an admin narrows where the organisation may register from).
OBJECT_STORE_PREFIXES = {("PUT", "/v1/organisation/dataset-uri-prefixes")}
SHARED_BUCKET = "s3://shared-corpora"  # DATASET_URI_PREFIXES of these tests: every organisation's ceiling


@pytest.fixture
def pg_env() -> dict[str, str]:
    return {"DATASET_URI_PREFIXES": f"{SHARED_BUCKET}/"}


# The operators' routes hold no organisation's objects, and no organisation's key may call them (tests/security/
# test_scopes.py: 403 to every key without scope operator).
OPERATORS = "/v1/operator/"


def v1_routes(app) -> list[tuple[str, str, APIRoute]]:
    """(method, path, route) of every /v1 route of the app, prefixes applied."""
    out = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, APIRoute) and context.path.startswith("/v1/"):
            out += [(method, context.path, route) for method in sorted(context.methods)]
    return out


@pytest.fixture
def alice_objects(pg_client):
    """Alice's dataset, queued job (with a checkpoint and metrics), ping and model, and everything that names them."""
    from app.core.settings import get_settings

    alice = bearer("alice")
    dataset = pg_client.post(
        "/v1/datasets",
        headers=alice,
        data={"name": "alice-private-corpus", "kind": "parallel"},
        files={"file": ("pears.jsonl", CORPUS)},
    )
    assert dataset.status_code == 201, dataset.text
    from worker.data.ingest import process

    assert process(dataset.json()["id"]) == "ready"  # the data queue's work, as a worker does it
    job = pg_client.post(
        "/v1/jobs",
        headers=alice,
        json={
            "objective": "translation",
            "dataset_id": dataset.json()["id"],
            "model": {"preset": "tiny", "vocab_size": 500},
            "training": {"max_steps": 10},
        },
    )
    assert job.status_code == 201, job.text
    ping = pg_client.post("/v1/pings", headers=alice, json={"queue": "training"})
    assert ping.status_code == 202, ping.text
    database_url = get_settings().database_url
    job_id = job.json()["id"]
    checkpoint_id = insert_job_outputs(database_url, job_id, f"jobs/{job_id}/step-00000010")
    model_id = insert_tiny_model(database_url, "alice", "models/alice-secret-model", sha256="a" * 64)
    evaluation = pg_client.post(
        f"/v1/models/{model_id}/evaluations", headers=alice, json={"dataset_id": dataset.json()["id"]}
    )
    assert evaluation.status_code == 202, evaluation.text
    translation = pg_client.post(
        f"/v1/models/{model_id}/translations", headers=alice, files={"file": ("alice-notes.txt", b"one pear\n")}
    )
    assert translation.status_code == 202, translation.text
    dataset_translation = pg_client.post(
        f"/v1/models/{model_id}/dataset-translations", headers=alice, json={"dataset_id": dataset.json()["id"]}
    )
    assert dataset_translation.status_code == 202, dataset_translation.text
    pipeline = pg_client.post(
        "/v1/pipelines",
        headers=alice,
        json={"kind": "distillation", "name": "alice-secret-pipeline", "teacher_model_id": model_id,
              "dataset_id": dataset.json()["id"]},
    )  # fmt: skip
    assert pipeline.status_code == 201, pipeline.text
    registered = pg_client.patch(f"/v1/models/{model_id}", headers=alice, json={"name": "alice-secret-name"})
    assert registered.status_code == 200, registered.text
    aliased = pg_client.put(
        "/v1/models/alice-secret-name/aliases/alice-secret-alias", headers=alice, json={"version": 1}
    )
    assert aliased.status_code == 200, aliased.text
    webhook = pg_client.post(
        "/v1/webhooks",
        headers=alice,
        json={"url": "https://93.184.215.14/alice-secret-hook", "events": ["job.failed"], "description": "alice-hook"},
    )
    assert webhook.status_code == 201, webhook.text
    delivery = pg_client.post(f"/v1/webhooks/{webhook.json()['id']}/test", headers=alice)
    assert delivery.status_code == 202, delivery.text
    sweep = pg_client.post(
        "/v1/sweeps",
        headers=alice,
        json={
            "name": "alice-secret-sweep",
            "job": {"objective": "translation", "dataset_id": dataset.json()["id"], "training": {"max_steps": 10}},
            "space": {"training.lr_scale": {"type": "float", "low": 0.5, "high": 2.0}},
            "budget": {"trials": 2},
        },
    )
    assert sweep.status_code == 201, sweep.text
    glossary = pg_client.post(
        "/v1/glossaries",
        headers=alice,
        json={
            "name": "alice-secret-glossary",
            "source_language": "en",
            "target_language": "de",
            "entries": [{"source": "alice-secret-term", "target": "alice-geheim"}],
        },
    )
    assert glossary.status_code == 201, glossary.text
    correction = pg_client.post(
        f"/v1/models/{model_id}/corrections",
        headers=alice,
        json={"source": "alice-secret-source", "translation": "x", "corrected": "alice-secret-correction"},
    )
    assert correction.status_code == 201, correction.text
    own_prefixes = {"prefixes": [f"{SHARED_BUCKET}/alice-secret-corpora"]}
    narrowed = pg_client.put("/v1/organisation/dataset-uri-prefixes", headers=alice, json=own_prefixes)
    assert narrowed.status_code == 200, narrowed.text
    robot = pg_client.post("/v1/members", headers=alice, json={"name": "alice-robot", "role": "member"})
    assert robot.status_code == 201, robot.text
    robot_key = pg_client.post(
        "/v1/keys", headers=alice, json={"name": "alice-robot-key", "member": "alice-robot", "scopes": ["read"]}
    )
    assert robot_key.status_code == 201, robot_key.text
    ids = {
        "name": "alice-secret-name",
        "alias": "alice-secret-alias",
        "dataset_id": dataset.json()["id"],
        "job_id": job_id,
        "ping_id": ping.json()["id"],
        "model_id": model_id,
        "evaluation_id": evaluation.json()["id"],
        "translation_id": translation.json()["id"],
        "dataset_translation_id": dataset_translation.json()["id"],
        "pipeline_id": pipeline.json()["id"],
        "sweep_id": sweep.json()["id"],
        "webhook_id": webhook.json()["id"],
        "delivery_id": delivery.json()["id"],
        "key_id": robot_key.json()["id"],
        "member_id": robot.json()["id"],
        "glossary_id": glossary.json()["id"],
        "correction_id": correction.json()["id"],
    }
    secrets = [
        *ids.values(),
        checkpoint_id,
        "alice",
        "alice-private-corpus",
        dataset.json()["sha256"],
        "c" * 64,
        "a" * 64,
        "alice-secret-model",
        "alice-secret-sweep",
        "alice-notes",
        "alice-secret-log-line",
        "alice-memory-report",
        f"jobs/{job_id}",
        "alice-secret-hook",
        "alice-hook",
        webhook.json()["secret"],
        delivery.json()["message_id"],
        "alice-robot",
        robot_key.json()["prefix"],
        "alice-secret-corpora",
        "alice-secret-glossary",
        "alice-secret-term",
        "alice-secret-source",
        "alice-secret-correction",
        "alice-secret-pipeline",
    ]
    return {"headers": alice, "ids": ids, "secrets": secrets}


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


def _operator_key() -> dict[str, str]:
    from app.db.operators import create_operator_key
    from app.db.session import session_scope

    with session_scope() as session:
        _row, clear = create_operator_key(session, "ops")
    return {"Authorization": f"Bearer {clear}"}


def test_unknown_fields_on_every_json_body_are_422(pg_client, alice_objects):
    """`status`, `owner`, `owner_id` and `storage_key` in any request body (top level or nested) are refused."""
    alice, ids = alice_objects["headers"], alice_objects["ids"]
    valid = {
        **SAMPLE_BODIES,
        ("POST", "/v1/jobs"): {
            "objective": "translation",
            "dataset_id": ids["dataset_id"],
            "model": {"preset": "tiny", "vocab_size": 500},
        },
        ("POST", "/v1/pings"): {"queue": "inference"},
        ("POST", "/v1/keys"): {"name": "ci"},
        ("POST", "/v1/members"): {"name": "carol"},
        ("POST", "/v1/estimate"): {"model": {"preset": "tiny", "vocab_size": 500}},
        ("POST", "/v1/webhooks"): {"url": "https://93.184.215.14/in", "events": ["job.failed"]},
        ("POST", "/v1/datasets/register"): {"name": "wmt", "kind": "parallel", "uri": "s3://corpora/wmt.tsv"},
        ("PUT", "/v1/organisation/dataset-uri-prefixes"): {"prefixes": [f"{SHARED_BUCKET}/x"]},
        ("POST", "/v1/sweeps"): {
            "name": "pears",
            "job": {"objective": "translation", "dataset_id": ids["dataset_id"]},
            "space": {"model.dropout": {"type": "float", "low": 0.0, "high": 0.3}},
            "budget": {"trials": 2},
        },
        ("POST", "/v1/operator/organisations"): {"name": "carol"},
        ("POST", "/v1/pipelines"): {
            "kind": "distillation",
            "name": "p",
            "teacher_model_id": ids["model_id"],
            "dataset_id": ids["dataset_id"],
        },
        ("POST", "/v1/glossaries"): {
            "name": "pears",
            "source_language": "en",
            "target_language": "de",
            "entries": [{"source": "pear", "target": "Birne"}],
        },
        ("PUT", "/v1/operator/organisations/{organisation}/quotas"): {
            "storage_gb": 1.0,
            "active_jobs": 1,
            "worker_minutes_per_day": None,
        },
    }
    operator = _operator_key()
    checked = 0
    for method, path, route in v1_routes(pg_client.app):
        if route.body_field is None or path in UPLOAD_ROUTES:
            continue
        assert (method, path) in valid, f"{method} {path}: add a valid body to this test"
        url = path.format(**ids, organisation="alice")
        headers = operator if path.startswith(OPERATORS) else alice
        for field in UNKNOWN_FIELDS:
            response = pg_client.request(method, url, headers=headers, json={**valid[(method, path)], field: "x"})
            assert response.status_code == 422, (method, path, field, response.text)
            assert field in response.text
        checked += 1
    nested = {**valid[("POST", "/v1/jobs")], "model": {"preset": "tiny", "storage_key": "models/someone-elses"}}
    response = pg_client.post("/v1/jobs", headers=alice, json=nested)
    assert response.status_code == 422 and "storage_key" in response.text
    assert checked >= 5


@pytest.mark.parametrize("field", [*UNKNOWN_FIELDS, "path"])
def test_unknown_upload_form_fields_are_422(pg_client, field):
    """An upload (a dataset, a model archive, a file to translate) naming its own storage location (or owner, or
    status) is refused, not silently dropped."""
    from app.core.settings import get_settings

    alice = bearer("alice")
    model_id = insert_tiny_model(get_settings().database_url, "alice", "models/m")
    for path, form, files in (
        ("/v1/datasets", {"name": "d", "kind": "parallel"}, {"file": ("pears.jsonl", CORPUS)}),
        ("/v1/models/import", {}, {"file": ("m.tar.gz", b"not read")}),
        (f"/v1/models/{model_id}/translations", {}, {"file": ("pears.txt", b"one pear\n")}),
    ):
        response = pg_client.post(path, headers=alice, data={**form, field: "../../elsewhere"}, files=files)
        assert response.status_code == 422, (path, response.text)
        assert response.json()["detail"][0]["loc"] == ["body", field], path


def test_an_upload_filename_never_becomes_a_path(pg_client, tmp_path):
    """The client's file name is only a format hint: the file lands under a key the server made."""
    from app.core.settings import get_settings

    response = pg_client.post(
        "/v1/datasets",
        headers=bearer("alice"),
        data={"name": "d", "kind": "parallel"},
        files={"file": ("../../../escaped.jsonl", CORPUS)},
    )
    assert response.status_code == 201, response.text
    root = Path(get_settings().artifact_root)
    stored = [p for p in root.rglob("*") if p.is_file()]
    assert [p.relative_to(root).as_posix() for p in stored] == [f"datasets/{response.json()['id']}/data.jsonl"]
    assert not list(tmp_path.parent.rglob("escaped.jsonl"))


def test_no_route_takes_a_file_path_or_storage_location(pg_client):
    """Checkpoint and model files are found from database rows only: no parameter or body field names a location."""
    spec = pg_client.get("/openapi.json").json()
    components = spec.get("components", {}).get("schemas", {})

    def properties(schema: dict, seen: set[str]) -> set[str]:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[1]
            return set() if name in seen else properties(components[name], seen | {name})
        names = set(schema.get("properties", {}))
        for sub in [
            *schema.get("properties", {}).values(),
            *schema.get("anyOf", []),
            *schema.get("allOf", []),
            schema.get("items"),
            schema.get("additionalProperties"),
        ]:
            if isinstance(sub, dict) and sub:
                names |= properties(sub, seen)
        return names

    found: dict[str, set[str]] = {}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            names = {p["name"].lower() for p in operation.get("parameters", [])}
            names |= {p.lower() for p in path.replace("}", "{").split("{")[1::2]}
            for content in operation.get("requestBody", {}).get("content", {}).values():
                names |= {n.lower() for n in properties(content.get("schema", {}), set())}
            if (method.upper(), path) in RECEIVER_URLS:
                names -= {"url"}
            if (method.upper(), path) in OBJECT_STORE_URIS:
                names -= {"uri"}
            if (method.upper(), path) in OBJECT_STORE_PREFIXES:
                names -= {"prefixes"}
            if names & LOCATION_NAMES:
                found[f"{method.upper()} {path}"] = names & LOCATION_NAMES
    assert not found, f"routes that take a location: {found}"
