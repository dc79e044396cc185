"""A key with scope train but not read follows the jobs it submitted, and only those: it reads, lists, labels and
cancels them, their metrics, logs and checkpoints; another key's job is 404 to it, as another organisation's is. A
key with read sees every job of its organisation, whoever submitted it."""

from __future__ import annotations

import pytest

JOB_READS = ("", "/metrics", "/checkpoints", "/logs", "/memory", "/dynamics", "/embeddings")


@pytest.fixture
def org_key(client):
    """`org_key(name, scopes)`: the headers of a new key of member `name` (a member) of organisation alice."""
    from app.db.keys import create_key
    from app.db.session import session_scope

    def make(name: str, scopes: list[str]) -> dict[str, str]:
        with session_scope() as session:
            _row, clear = create_key(session, f"{name}-key", "alice", member_name=name, role="member", scopes=scopes)
        return {"Authorization": f"Bearer {clear}"}

    return make


def _submit(client, headers, dataset_id, **extra) -> dict:
    body = {"objective": "translation", "dataset_id": dataset_id, "training": {"max_steps": 20}}
    response = client.post("/v1/jobs", json=body, headers={**headers, **extra})
    assert response.status_code in (200, 201), response.text
    return response.json()


def test_a_train_key_reads_the_jobs_it_submitted(client, alice, org_key, parallel_id):
    trainer = org_key("tom", ["train"])
    job = _submit(client, trainer, parallel_id)
    for tail in JOB_READS:
        answer = client.get(f"/v1/jobs/{job['id']}{tail}", headers=trainer)
        assert answer.status_code == 200, (tail, answer.text)
    assert client.get(f"/v1/jobs/{job['id']}", headers=trainer).json()["status"] == "queued"
    assert [j["id"] for j in client.get("/v1/jobs", headers=trainer).json()["data"]] == [job["id"]]
    with client.stream("GET", f"/v1/jobs/{job['id']}/events", headers=trainer) as events:
        assert events.status_code == 200
    labelled = client.patch(f"/v1/jobs/{job['id']}", json={"name": "mine"}, headers=trainer)
    assert labelled.status_code == 200 and labelled.json()["name"] == "mine"
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=trainer).json()["status"] == "cancelled"
    # Nothing else of the organisation's opens to it: datasets, models and usage still need read.
    assert client.get("/v1/datasets", headers=trainer).status_code == 403


def test_another_keys_job_is_404_to_a_train_key_and_missing_from_its_list(client, alice, org_key, parallel_id):
    trainer, other = org_key("tom", ["train"]), org_key("uma", ["train"])
    theirs = _submit(client, other, parallel_id)
    admins = _submit(client, alice, parallel_id)
    mine = _submit(client, trainer, parallel_id)
    for job in (theirs, admins):
        for tail in JOB_READS:
            answer = client.get(f"/v1/jobs/{job['id']}{tail}", headers=trainer)
            assert answer.status_code == 404 and answer.json() == {"detail": f"job {job['id']} not found"}, tail
        assert client.get(f"/v1/jobs/{job['id']}/events", headers=trainer).status_code == 404
        assert client.patch(f"/v1/jobs/{job['id']}", json={"name": "x"}, headers=trainer).status_code == 404
        assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=trainer).status_code == 404
        assert client.delete(f"/v1/jobs/{job['id']}", headers=trainer).status_code == 404
    listed = client.get("/v1/jobs", headers=trainer).json()
    assert [j["id"] for j in listed["data"]] == [mine["id"]] and listed["total"] == 1
    compared = client.get("/v1/jobs/compare", params={"ids": f"{mine['id']},{theirs['id']}"}, headers=trainer)
    assert compared.status_code == 404 and theirs["id"] in compared.text
    # Still queued, unlabelled: the refusals changed nothing.
    assert client.get(f"/v1/jobs/{theirs['id']}", headers=alice).json()["status"] == "queued"


def test_a_key_with_read_sees_every_job_of_its_organisation(client, alice, org_key, parallel_id):
    trainer, reader = org_key("tom", ["train"]), org_key("rita", ["read"])
    jobs = {_submit(client, trainer, parallel_id)["id"], _submit(client, alice, parallel_id)["id"]}
    for headers in (reader, alice):
        assert {j["id"] for j in client.get("/v1/jobs", headers=headers).json()["data"]} == jobs
        assert all(client.get(f"/v1/jobs/{job}/logs", headers=headers).status_code == 200 for job in jobs)
    # A key of neither scope is refused, naming both.
    runner = org_key("ivan", ["inference"])
    refused = client.get("/v1/jobs", headers=runner)
    assert refused.status_code == 403
    assert "lacks scope 'read' or 'train', which GET /v1/jobs needs; its scopes: inference" in refused.json()["detail"]


def test_jobs_stored_before_keys_were_recorded_are_seen_by_read_keys_only(client, alice, org_key):
    from tests.api.test_job_labels import job_rows

    [old] = job_rows("alice", 1)  # no key_id, as a job submitted before revision 0031 that no audit event names
    assert client.get(f"/v1/jobs/{old}", headers=alice).status_code == 200
    assert client.get(f"/v1/jobs/{old}", headers=org_key("tom", ["train"])).status_code == 404


def test_an_idempotency_key_of_another_key_is_409_to_a_train_key_and_names_no_job(client, alice, org_key, parallel_id):
    trainer, other = org_key("tom", ["train"]), org_key("uma", ["train"])
    first = _submit(client, other, parallel_id, **{"Idempotency-Key": "nightly-1"})
    body = {"objective": "translation", "dataset_id": parallel_id, "training": {"max_steps": 20}}
    replayed = client.post("/v1/jobs", json=body, headers={**trainer, "Idempotency-Key": "nightly-1"})
    assert replayed.status_code == 409
    assert replayed.json() == {
        "detail": "Idempotency-Key 'nightly-1' was used by another API key of the organisation; choose another"
    }
    # The key that made it replays it; a key with read too (it sees the job anyway).
    again = client.post("/v1/jobs", json=body, headers={**other, "Idempotency-Key": "nightly-1"})
    assert again.status_code == 201 and again.json()["id"] == first["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    by_admin = client.post("/v1/jobs", json=body, headers={**alice, "Idempotency-Key": "nightly-1"})
    assert by_admin.json()["id"] == first["id"]


def test_a_sweeps_trials_are_its_keys(client, alice, org_key, parallel_id):
    """A sweep's trials are submitted by the sweep: the key that started it follows them with train alone."""
    from tests.api.test_sweeps import _sweep

    starter = org_key("sam", ["train", "models:write"])
    sweep = client.post("/v1/sweeps", json=_sweep(parallel_id), headers=starter)
    assert sweep.status_code == 201, sweep.text
    trials = {trial["job_id"] for trial in sweep.json()["trials"]}
    listed = client.get("/v1/jobs", params={"sweep_id": sweep.json()["id"]}, headers=starter).json()["data"]
    assert {j["id"] for j in listed} == trials and len(trials) == 2
    assert client.get(f"/v1/jobs/{next(iter(trials))}", headers=org_key("tom", ["train"])).status_code == 404
