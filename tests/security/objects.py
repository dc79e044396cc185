"""Alice's objects, and what the object-level authorization tests send to every route: sample bodies, files and
queries, and the names a route's body must not take (tests/security/test_object_authorization.py,
tests/security/test_request_bodies.py; each makes its pg_env and alice_objects fixtures from PG_ENV and
make_alice_objects)."""

from __future__ import annotations

import json

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


PG_ENV = {"DATASET_URI_PREFIXES": f"{SHARED_BUCKET}/"}  # pg_client's settings in the modules that use these


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


def make_alice_objects(pg_client):
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
