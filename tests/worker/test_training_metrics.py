"""A training step's numbers on their way to `GET /v1/jobs/{id}/metrics`: the training task's on_step callback
buffers them in the RunState, the lease keeper's flush writes them as metric rows, the API reads them back. On the
embedded SQLite database, in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from model.train.events import StepInfo
from tests.support.api_app import migrated_client


@pytest.fixture
def client(settings_env) -> TestClient:
    with migrated_client() as test_client:
        yield test_client


def _running_job(client: TestClient) -> tuple[str, dict[str, str], object]:
    """A job of alice's, claimed by this process: (job id, alice's headers, the claim)."""
    from app.db import job_rows
    from app.db.keys import create_key
    from app.db.session import session_scope

    with session_scope() as session:
        _row, clear = create_key(session, "alice")
    headers = {"Authorization": f"Bearer {clear}"}
    files = {"file": ("d.jsonl", b'{"source": "one", "target": "eins"}\n', "application/jsonl")}
    dataset = client.post("/v1/datasets", files=files, data={"name": "demo", "kind": "parallel"}, headers=headers)
    assert dataset.status_code == 201, dataset.text
    job = client.post(
        "/v1/jobs", json={"objective": "translation", "dataset_id": dataset.json()["id"]}, headers=headers
    )
    assert job.status_code == 201, job.text
    with session_scope() as session:
        claim = job_rows.claim(session, job.json()["id"], "test-host/1", 60)
    assert claim is not None
    return job.json()["id"], headers, claim


def _info(step: int, **counts: int) -> StepInfo:
    return StepInfo(step, 10, 5.0, 1e-4, 1000.0, 1.0, float(step), 10.0, 4.9, tokens=90, epoch=0, **counts)


def test_the_padding_of_each_step_reaches_the_jobs_metrics(client, tmp_path: Path):
    from worker.training.callbacks import job_callbacks
    from worker.training.lease import RunState, flush

    job_id, headers, claim = _running_job(client)
    state = RunState(claim)
    on_step = job_callbacks(state, job_id, tmp_path, 60).on_step
    assert on_step is not None
    on_step(_info(1, padded_tokens=100, src_tokens=80, padded_src_tokens=120))
    on_step(_info(2, padded_tokens=90, src_tokens=80, padded_src_tokens=100))
    on_step(_info(3))  # not counted (a caller of the loop's older StepInfo): no padding point, the rest written
    flush(state, 60)
    body = client.get(f"/v1/jobs/{job_id}/metrics", headers=headers).json()["series"]
    assert body["target_padding"]["steps"] == [1, 2]
    assert body["target_padding"]["values"] == pytest.approx([0.1, 0.0])
    assert body["source_padding"]["values"] == pytest.approx([1 / 3, 0.2])
    assert body["tokens_per_second"]["steps"] == [1, 2, 3]
