"""The audit trail: each change made through the API leaves one row saying who, when, what and from where, in the
transaction of the change (a refused or rolled-back change leaves none); GET /v1/audit shows an organisation its own
rows to admin keys only, newest first, paged and filtered."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.api.test_datasets import _jsonl, _ready
from tests.api.test_init_model import _model_row
from tests.api.test_sweeps import _sweep
from tests.api.test_webhooks import PUBLIC


def _events(client, headers, **query) -> list[dict]:
    response = client.get("/v1/audit", headers=headers, params={"limit": 500, **query})
    assert response.status_code == 200, response.text
    return response.json()["data"]


def _actions(client, headers, **query) -> list[tuple[str, str]]:
    """(action, object_id), oldest first."""
    return [(e["action"], e["object_id"]) for e in reversed(_events(client, headers, **query))]


@pytest.fixture
def org_key(client):
    from app.db.keys import create_key
    from app.db.session import session_scope

    def make(member: str, role: str, scopes: list[str] | None = None, owner: str = "acme") -> dict[str, str]:
        with session_scope() as session:
            _row, clear = create_key(session, f"{member}-key", owner, member_name=member, role=role, scopes=scopes)
        return {"Authorization": f"Bearer {clear}"}

    return make


def test_keys_and_members_record_who_did_it_and_from_where(client, alice):
    created = client.post("/v1/keys", headers={**alice, "X-Request-ID": "req-42"}, json={"name": "ci"}).json()
    member = client.post("/v1/members", headers=alice, json={"name": "max"}).json()
    assert client.patch(f"/v1/members/{member['id']}", headers=alice, json={"role": "viewer"}).status_code == 200
    assert client.delete(f"/v1/keys/{created['id']}", headers=alice).status_code == 200
    assert client.delete(f"/v1/keys/{created['id']}", headers=alice).status_code == 200  # again: nothing new
    assert _actions(client, alice) == [
        ("key.created", created["id"]),
        ("member.added", member["id"]),
        ("member.role_changed", member["id"]),
        ("key.revoked", created["id"]),
    ]
    first, _added, changed, _revoked = reversed(_events(client, alice))
    me = client.get("/v1/me", headers=alice).json()
    assert (first["key_id"], first["key_name"], first["key_prefix"]) == (me["key_id"], me["key_name"], me["key_prefix"])
    assert (first["member_name"], first["request_id"], first["client"]) == ("alice", "req-42", "testclient")
    assert first["details"]["prefix"] == created["prefix"] and created["key"] not in str(first)
    assert changed["details"] == {"name": "max", "from": "member", "to": "viewer"}


def test_datasets_uploaded_filtered_and_deleted_are_recorded(client, alice):
    dataset = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))
    filtered = client.post(f"/v1/datasets/{dataset['id']}/filter", headers=alice, json={"rules": {"max_length": 50}})
    assert filtered.status_code == 201, filtered.text
    assert client.delete(f"/v1/datasets/{filtered.json()['id']}", headers=alice).status_code == 204
    assert _actions(client, alice, kind="dataset") == [
        ("dataset.uploaded", dataset["id"]),
        ("dataset.filtered", filtered.json()["id"]),
        ("dataset.deleted", filtered.json()["id"]),
    ]
    assert _events(client, alice, action="dataset.filtered")[0]["details"]["parent_id"] == dataset["id"]


def test_jobs_submitted_labelled_and_cancelled_are_recorded_and_a_replay_is_not(client, alice, parallel_id):
    body = {"objective": "translation", "dataset_id": parallel_id}
    job = client.post("/v1/jobs", json=body, headers={**alice, "Idempotency-Key": "k1"}).json()
    replay = client.post("/v1/jobs", json=body, headers={**alice, "Idempotency-Key": "k1"})
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert client.patch(f"/v1/jobs/{job['id']}", json={"name": "first"}, headers=alice).status_code == 200
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=alice).status_code == 202
    assert _actions(client, alice, kind="job") == [
        ("job.submitted", job["id"]),
        ("job.labelled", job["id"]),
        ("job.cancelled", job["id"]),
    ]


def test_the_registry_records_names_alias_moves_and_deletions(client, alice):
    first, second = _model_row("alice"), _model_row("alice")
    for model_id in (first, second):
        assert client.patch(f"/v1/models/{model_id}", json={"name": "en-de"}, headers=alice).status_code == 200
    assert client.put("/v1/models/en-de/aliases/prod", json={"version": 1}, headers=alice).status_code == 200
    assert client.put("/v1/models/en-de/aliases/prod", json={"version": 2}, headers=alice).status_code == 200
    assert client.put("/v1/models/en-de/aliases/prod", json={"version": 2}, headers=alice).status_code == 200
    assert client.delete("/v1/models/en-de/aliases/prod", headers=alice).status_code == 204
    assert client.delete(f"/v1/models/{first}", headers=alice).status_code == 200
    assert _actions(client, alice) == [
        ("model.registered", first),
        ("model.registered", second),
        ("alias.moved", "en-de@prod"),
        ("alias.moved", "en-de@prod"),  # the same version again moves nothing, records nothing
        ("alias.removed", "en-de@prod"),
        ("model.deleted", first),
    ]
    moved = _events(client, alice, action="alias.moved")[0]["details"]
    assert (moved["from_version"], moved["to_version"]) == (1, 2)
    assert _events(client, alice, action="model.registered", object_id=second)[0]["details"]["to"] == {
        "name": "en-de",
        "version": 2,
    }


def test_webhooks_sweeps_and_evaluations_are_recorded(client, alice, parallel_id):
    hook = client.post("/v1/webhooks", headers=alice, json={"url": PUBLIC, "events": ["job.succeeded"]}).json()
    assert client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", headers=alice).status_code == 200
    assert client.delete(f"/v1/webhooks/{hook['id']}", headers=alice).status_code == 204
    sweep = client.post("/v1/sweeps", json=_sweep(parallel_id), headers=alice).json()
    assert client.post(f"/v1/sweeps/{sweep['id']}/cancel", headers=alice).status_code == 202
    model = _model_row("alice")
    evaluation = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id}, headers=alice)
    assert evaluation.status_code == 202, evaluation.text
    actions = _actions(client, alice)
    assert [a for a in actions if a[0].startswith(("webhook.", "sweep.", "evaluation."))] == [
        ("webhook.created", hook["id"]),
        ("webhook.secret_rotated", hook["id"]),
        ("webhook.deleted", hook["id"]),
        ("sweep.created", sweep["id"]),
        ("sweep.cancelled", sweep["id"]),
        ("evaluation.requested", evaluation.json()["id"]),
    ]
    assert hook["secret"] not in str(_events(client, alice))


def test_a_refused_or_rolled_back_change_leaves_no_row(client, alice, parallel_id):
    """Fault: changes that fail after their audit row was added (a conflict, a rollback). Pass: no row."""
    dataset = _ready(client, alice, _jsonl([("one", "eins")]))
    client.post("/v1/jobs", json={"objective": "translation", "dataset_id": dataset["id"]}, headers=alice)
    before = _actions(client, alice)
    assert client.delete(f"/v1/datasets/{dataset['id']}", headers=alice).status_code == 409  # in use
    bad = client.post("/v1/jobs", json={"objective": "translation", "dataset_id": parallel_id, "x": 1}, headers=alice)
    assert bad.status_code == 422
    me = client.get("/v1/me", headers=alice).json()
    own = client.get("/v1/members", headers=alice).json()["data"][0]
    assert client.patch(f"/v1/members/{own['id']}", headers=alice, json={"role": "viewer"}).status_code == 409
    assert me["member"] == own["name"]
    assert _actions(client, alice) == before

    hook = client.post("/v1/webhooks", headers=alice, json={"url": PUBLIC, "events": ["job.succeeded"]}).json()
    assert client.patch(f"/v1/webhooks/{hook['id']}", headers=alice, json={"enabled": False}).status_code == 200
    before = _actions(client, alice)
    # the row of a test event is added, then the service refuses it (disabled) and the transaction rolls back
    assert client.post(f"/v1/webhooks/{hook['id']}/test", headers=alice).status_code == 409
    assert _actions(client, alice) == before

    from app.db.audit_rows import Origin, add_event
    from app.db.keys import identify
    from app.db.session import session_scope
    from app.db.tables import Job

    with session_scope() as session:  # a row added, flushed, then rolled back; one waiting for a job never made
        caller = identify(session, alice["Authorization"].removeprefix("Bearer "))
        assert caller is not None
        add_event(session, caller, Origin(None, None), "job.cancelled", "job", "some-id")
        add_event(session, caller, Origin(None, None), "job.submitted", "job", Job)
        session.flush()
        session.rollback()
    assert _actions(client, alice) == before


def test_the_trail_pages_newest_first_and_filters(client, alice, org_key):
    other = org_key("bob", "member", owner="alice")
    for name in ("a", "b", "c"):
        client.post("/v1/members", headers=alice, json={"name": name})
    client.post("/v1/keys", headers=other, json={"name": "bob-ci"})
    page = client.get("/v1/audit", headers=alice, params={"limit": 2}).json()
    assert page["total"] == 4 and [e["action"] for e in page["data"]] == ["key.created", "member.added"]
    rest = client.get("/v1/audit", headers=alice, params={"limit": 2, "offset": 2}).json()["data"]
    assert [e["details"]["name"] for e in rest] == ["b", "a"]
    assert [e["member_name"] for e in _events(client, alice, member="bob")] == ["bob"]
    bob_prefix = other["Authorization"].removeprefix("Bearer ")[:10]
    assert len(_events(client, alice, key=bob_prefix)) == 1
    assert len(_events(client, alice, key=bob_prefix + "...")) == 1
    assert len(_events(client, alice, action="member.added")) == 3
    now = datetime.now(UTC)
    assert len(_events(client, alice, since=(now - timedelta(minutes=5)).isoformat())) == 4
    assert _events(client, alice, until=(now - timedelta(minutes=5)).isoformat()) == []


@pytest.mark.parametrize(
    ("query", "loc", "says"),
    [
        ({"action": "job.exploded"}, "action", "unknown action 'job.exploded'"),
        ({"kind": "planet"}, "kind", "unknown kind 'planet'"),
        ({"since": "2026-01-02T00:00:00"}, "since", "has no timezone"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until", "is not after since"),
        ({"since": "yesterday"}, "since", "datetime"),
        ({"until": "0.5"}, "until", "'0.5' is not ISO 8601"),  # pydantic alone reads seconds since 1970
        ({"since": "1767225600"}, "since", "is not ISO 8601"),
        ({"limit": 0}, "limit", "greater than or equal to 1"),
    ],
)
def test_a_bad_filter_is_422_naming_it(client, alice, query, loc, says):
    response = client.get("/v1/audit", headers=alice, params=query)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["query", loc] and says in detail["msg"], detail


def test_only_admin_keys_read_the_trail_and_only_their_organisations(client, alice, org_key, make_key):
    member = org_key("max", "member", owner="alice")
    refused = client.get("/v1/audit", headers=member)
    assert refused.status_code == 403 and "lacks scope 'admin'" in refused.json()["detail"]
    client.post("/v1/members", headers=alice, json={"name": "ann"})
    bob = make_key("bob")
    client.post("/v1/members", headers=bob, json={"name": "bea"})
    assert [e["details"]["name"] for e in _events(client, alice)] == ["ann"]
    assert [e["details"]["name"] for e in _events(client, bob)] == ["bea"]
    ann = _events(client, alice)[0]["object_id"]
    assert _events(client, bob, object_id=ann) == []


def test_the_cli_lists_the_trail_with_filters(cli, alice):
    key = alice["Authorization"].removeprefix("Bearer ")
    assert cli("member-add", "max", "--key", key)[0] == 0
    assert cli("create-api-key", "ci", "--scope", "read", "--key", key)[0] == 0
    code, out, err = cli("audit", "--key", key)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["WHEN", "ACTION", "OBJECT", "BY"]
    assert [line.split()[2] for line in lines[1:]] == ["key.created", "member.added"]  # newest first
    code, out, _ = cli("audit", "--action", "member.added", "--json", "--key", key)
    assert [json.loads(line)["details"]["name"] for line in out.splitlines()] == ["max"]
    code, _, err = cli("audit", "--kind", "planet", "--key", key)
    assert code != 0 and "unknown kind 'planet'" in err


def test_model_and_webhook_updates_and_test_events_are_recorded(client, alice):
    model = _model_row("alice")
    assert client.patch(f"/v1/models/{model}", json={"description": "first try"}, headers=alice).status_code == 200
    assert client.patch(f"/v1/models/{model}", json={"name": "en-de"}, headers=alice).status_code == 200
    assert client.patch(f"/v1/models/{model}", json={"name": None}, headers=alice).status_code == 200
    hook = client.post("/v1/webhooks", headers=alice, json={"url": PUBLIC, "events": ["job.succeeded"]}).json()
    assert client.patch(f"/v1/webhooks/{hook['id']}", headers=alice, json={"description": "ci"}).status_code == 200
    assert client.post(f"/v1/webhooks/{hook['id']}/test", headers=alice).status_code == 202
    assert _actions(client, alice) == [
        ("model.updated", model),
        ("model.registered", model),
        ("model.unregistered", model),
        ("webhook.created", hook["id"]),
        ("webhook.updated", hook["id"]),
        ("webhook.tested", hook["id"]),
    ]
    unregistered = _events(client, alice, action="model.unregistered")[0]["details"]
    assert (unregistered["from"], unregistered["to"]) == (
        {"name": "en-de", "version": 1},
        {"name": None, "version": None},
    )
    assert _events(client, alice, action="webhook.updated")[0]["details"] == {"description": "ci"}


def test_deleting_a_job_a_model_and_a_name_is_recorded_and_a_refused_deletion_is_not(client, alice, parallel_id):
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    job_model, aliased, named = _model_row("alice"), _model_row("alice"), _model_row("alice")
    with session_scope() as session:
        job_id = session.get(TrainedModel, job_model).job_id
    client.patch(f"/v1/models/{aliased}", json={"name": "en-fr"}, headers=alice)
    client.put("/v1/models/en-fr/aliases/production", json={"version": 1}, headers=alice)
    client.patch(f"/v1/models/{named}", json={"name": "en-es"}, headers=alice)
    assert client.delete(f"/v1/models/{aliased}", headers=alice).status_code == 409  # refused: no row
    assert client.delete(f"/v1/jobs/{job_id}", headers=alice).status_code == 204
    assert client.delete(f"/v1/models/{aliased}?aliases=drop", headers=alice).status_code == 200
    assert client.delete("/v1/models/names/en-es?versions=delete", headers=alice).status_code == 200
    deletions = [e for e in _events(client, alice) if e["action"].endswith(".deleted")]
    by_action = {e["action"]: e for e in deletions}
    assert sorted(by_action) == ["job.deleted", "model.deleted", "name.deleted"] and len(deletions) == 3
    assert by_action["job.deleted"]["object_id"] == job_id
    assert by_action["model.deleted"]["details"]["aliases"] == ["en-fr@production: dropped"]
    assert (by_action["name.deleted"]["object_id"], by_action["name.deleted"]["details"]["versions"]) == ("en-es", [1])
