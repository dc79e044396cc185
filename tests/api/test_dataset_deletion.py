"""Deleting datasets: a file stays until the collector deletes it after the grace period; a dataset in use (by an
evaluation, a filtered child, a job testing on it, a running sweep) is 409 naming what uses it; a filtered dataset
deleted while being made leaves no file; on PostgreSQL a job submitted while its dataset is deleted either holds it
or finds it gone."""

from __future__ import annotations

import pytest

from tests.api.test_deletion import _count
from tests.api.test_init_model import _model_row


def _dataset_files(tmp_path, dataset_id: str) -> list:
    return [p for p in (tmp_path / "var").rglob("*") if p.is_file() and dataset_id in p.parts]


def test_a_deleted_datasets_file_stays_until_the_collector_deletes_it_after_the_grace_period(
    client, alice, parallel_id, tmp_path
):
    """Fault: the file went at once, under a worker still reading it. Pass: the row goes, the file stays with a
    tombstone; the collector keeps it until the grace period has passed, then deletes it."""
    from datetime import timedelta

    from app.artifacts import get_store
    from app.db.tables import ArtifactTombstone
    from worker import collector

    assert len(_dataset_files(tmp_path, parallel_id)) == 1
    assert client.delete(f"/v1/datasets/{parallel_id}", headers=alice).status_code == 204
    assert client.get(f"/v1/datasets/{parallel_id}", headers=alice).status_code == 404
    assert len(_dataset_files(tmp_path, parallel_id)) == 1
    assert _count(ArtifactTombstone, kind="dataset", object_id=parallel_id) == 1
    assert collector.collect(get_store(), collector.due_ids(timedelta(0)), timedelta(hours=1)) == []
    assert len(_dataset_files(tmp_path, parallel_id)) == 1
    deleted = collector.collect(get_store(), collector.due_ids(timedelta(0)), timedelta(0))
    assert deleted == [f"datasets/{parallel_id}"]
    assert _dataset_files(tmp_path, parallel_id) == []


def _in_use_by(client, headers, user: str, dataset_id: str) -> str:
    """Make `user` use the dataset; the words the 409 names it with."""
    if user == "evaluation":
        model_id = _model_row("alice")
        response = client.post(f"/v1/models/{model_id}/evaluations", json={"dataset_id": dataset_id}, headers=headers)
        assert response.status_code == 202, response.text
        return f"evaluation(s) {response.json()['id']} queued or running"
    if user == "filtered child":
        body = {"rules": {"deduplicate": True}}
        response = client.post(f"/v1/datasets/{dataset_id}/filter", json=body, headers=headers)
        assert response.status_code == 201, response.text
        return f"dataset(s) {response.json()['id']} being filtered from it"
    other = client.post(
        "/v1/datasets",
        headers=headers,
        data={"name": "train", "kind": "parallel"},
        files={"file": ("t.jsonl", b'{"source": "a", "target": "b"}\n', "application/octet-stream")},
    ).json()["id"]
    body = {"objective": "translation", "dataset_id": other, "test_dataset_id": dataset_id}
    response = client.post("/v1/jobs", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return f"active job(s) {response.json()['id']}"


@pytest.mark.parametrize("user", ["evaluation", "filtered child", "job testing on it"])
def test_a_dataset_in_use_is_409_naming_what_uses_it(client, alice, parallel_id, tmp_path, user):
    """Fault: only a job training or validating on it refused the deletion; a queued evaluation, a dataset being
    filtered from it, or a job's test set failed mid-run. Pass: 409 naming the user; the dataset and its file stay."""
    named = _in_use_by(client, alice, user, parallel_id)
    response = client.delete(f"/v1/datasets/{parallel_id}", headers=alice)
    assert response.status_code == 409, response.text
    assert response.json()["detail"] == (
        f"dataset {parallel_id} is used by {named}: wait for them to finish or cancel them"
    )
    assert client.get(f"/v1/datasets/{parallel_id}", headers=alice).status_code == 200
    assert len(_dataset_files(tmp_path, parallel_id)) == 1


def test_a_filtered_dataset_deleted_while_being_made_leaves_no_file(client, alice, parallel_id, tmp_path, monkeypatch):
    """Fault: a child deleted while a worker was writing it had its file written after the deletion (and after the
    collector's sweep): left in the store for ever. Pass: the worker finds its row gone and deletes what it wrote."""
    from datetime import timedelta

    from app.artifacts import get_store
    from worker import collector
    from worker.data import filtering

    body = {"rules": {"deduplicate": True}}
    child = client.post(f"/v1/datasets/{parallel_id}/filter", json=body, headers=alice).json()["id"]
    write = filtering._write

    def deleted_meanwhile(*args, **kwargs):  # the worker has read the row and is writing the rows it keeps
        assert client.delete(f"/v1/datasets/{child}", headers=alice).status_code == 204
        collector.collect(get_store(), collector.due_ids(timedelta(0)), timedelta(0))  # the grace period passed
        return write(*args, **kwargs)

    monkeypatch.setattr(filtering, "_write", deleted_meanwhile)
    assert filtering.make(child) == "skipped"
    assert _dataset_files(tmp_path, child) == []


def _slowed(monkeypatch, module, name: str, holding, seconds: float = 1.0) -> None:
    """module.name, slowed down: it says it has begun (holding.set()), waits `seconds`, then runs."""
    import time

    original = getattr(module, name)

    def slow(*args, **kwargs):
        holding.set()
        time.sleep(seconds)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, slow)


def test_on_postgresql_a_job_submitted_while_the_dataset_is_deleted_holds_it(pg, monkeypatch):
    """Fault: a job submitted at the moment its dataset was deleted passed its check, then the deletion went on
    (the job failing later, or its insert with it). Pass: the job holds the dataset until it commits; the deletion
    waits, sees the job and is 409 naming it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from app.services import job_submission
    from tests.api.test_datasets import _jsonl, _ready

    client, alice = pg
    dataset_id = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]
    holding = threading.Event()
    _slowed(monkeypatch, job_submission, "candidate_configs", holding)  # after the dataset is read
    with ThreadPoolExecutor(1) as pool:
        submitted = pool.submit(
            client.post, "/v1/jobs", json={"objective": "translation", "dataset_id": dataset_id}, headers=alice
        )
        assert holding.wait(10)
        deleted = client.delete(f"/v1/datasets/{dataset_id}", headers=alice)
        job = submitted.result(timeout=30)
    assert job.status_code == 201, job.text
    assert deleted.status_code == 409, deleted.text
    assert deleted.json()["detail"].startswith(f"dataset {dataset_id} is used by active job(s) {job.json()['id']}")
    assert client.get(f"/v1/jobs/{job.json()['id']}", headers=alice).json()["dataset_id"] == dataset_id


def test_on_postgresql_a_job_submitted_while_the_dataset_is_being_deleted_finds_it_gone(pg, monkeypatch):
    """Fault: the job read the dataset before the deletion committed and inserted a row that refers to nothing (an
    error from the database). Pass: the job waits for the deletion and is 422 naming the dataset as not found."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from app.db import tombstone_rows
    from tests.api.test_datasets import _jsonl, _ready

    client, alice = pg
    dataset_id = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]
    holding = threading.Event()
    _slowed(monkeypatch, tombstone_rows, "bury", holding)  # once the deletion has checked what uses the dataset
    with ThreadPoolExecutor(1) as pool:
        deleting = pool.submit(client.delete, f"/v1/datasets/{dataset_id}", headers=alice)
        assert holding.wait(10)
        job = client.post("/v1/jobs", json={"objective": "translation", "dataset_id": dataset_id}, headers=alice)
        assert deleting.result(timeout=30).status_code == 204
    assert job.status_code == 422, job.text
    assert job.json()["detail"][0]["msg"] == f"dataset {dataset_id} not found"


def test_a_dataset_a_running_sweep_trains_on_is_409_naming_the_sweep(client, alice, parallel_id):
    """A running sweep starts more trials on the dataset: its deletion is refused while the sweep runs, even with
    no trial active at the moment."""
    from sqlalchemy import update

    from app.db.session import session_scope
    from app.db.tables import Job
    from tests.api.test_sweeps import _sweep

    sweep = client.post("/v1/sweeps", json=_sweep(parallel_id), headers=alice)
    assert sweep.status_code == 201, sweep.text
    with session_scope() as session:  # between two trials: none active
        session.execute(update(Job).where(Job.sweep_id == sweep.json()["id"]).values(status="cancelled"))
    response = client.delete(f"/v1/datasets/{parallel_id}", headers=alice)
    assert response.status_code == 409, response.text
    assert response.json()["detail"] == (
        f"dataset {parallel_id} is used by running sweep(s) {sweep.json()['id']}: wait for them to finish or "
        "cancel them"
    )
