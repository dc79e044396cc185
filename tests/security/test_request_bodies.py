"""Request bodies cannot smuggle ownership, status or storage locations: an unknown field on every JSON body and
upload form is 422; an upload's filename never becomes a path; no route takes a file path or storage location.
The routes come from `app.routes`, as in tests/security/test_object_authorization.py."""

from __future__ import annotations

from pathlib import Path

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
from tests.security.rows import insert_tiny_model


def _operator_key() -> dict[str, str]:
    from app.db.operators import create_operator_key
    from app.db.session import session_scope

    with session_scope() as session:
        _row, clear = create_operator_key(session, "ops")
    return {"Authorization": f"Bearer {clear}"}


@pytest.fixture
def pg_env() -> dict[str, str]:
    return PG_ENV


@pytest.fixture
def alice_objects(pg_client):
    """Alice's objects (tests/security/objects.py)."""
    return make_alice_objects(pg_client)


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
