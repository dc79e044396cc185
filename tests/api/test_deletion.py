"""Deleting jobs, models and names: what is refused (409 naming why), what goes, what stays, and what the lineage
says afterwards."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from tests.api.test_init_model import _model_row


def _register(client, headers, model_id: str, name: str) -> None:
    response = client.patch(f"/v1/models/{model_id}", json={"name": name}, headers=headers)
    assert response.status_code == 200, response.text


def _point(client, headers, name: str, alias: str, version: int) -> None:
    response = client.put(f"/v1/models/{name}/aliases/{alias}", json={"version": version}, headers=headers)
    assert response.status_code == 200, response.text


def _job_of(model_id: str) -> str:
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    with session_scope() as session:
        job_id = session.get(TrainedModel, model_id).job_id
        assert job_id is not None
        return job_id


def _set_job(job_id: str, **values) -> None:
    from app.db.session import session_scope
    from app.db.tables import Job

    with session_scope() as session:
        job = session.get(Job, job_id)
        for name, value in values.items():
            setattr(job, name, value)


def _count(table, **where) -> int:
    from app.db.session import session_scope

    with session_scope() as session:
        query = select(func.count()).select_from(table)
        for name, value in where.items():
            query = query.where(getattr(table, name) == value)
        return session.scalar(query)


@pytest.mark.parametrize(
    ("status", "cancel_requested", "said"),
    [("queued", False, "queued"), ("running", False, "running"), ("running", True, "cancelling")],
)
def test_deleting_an_active_job_is_409_cancel_it_first(client, alice, status, cancel_requested, said):
    job_id = _job_of(_model_row("alice"))
    _set_job(job_id, status=status, cancel_requested=cancel_requested)
    response = client.delete(f"/v1/jobs/{job_id}", headers=alice)
    assert response.status_code == 409, response.text
    assert response.json()["detail"] == (
        f"job {job_id} is {said}: cancel it first (POST /v1/jobs/{job_id}/cancel) and delete it once it has stopped"
    )
    assert client.get(f"/v1/jobs/{job_id}", headers=alice).status_code == 200


def test_deleting_a_job_removes_its_records_and_keeps_its_model_serving(client, alice):
    from app.db.run_record_tables import JobCheckpoint, JobLog, Metric
    from app.db.session import session_scope
    from app.db.tables import ArtifactTombstone

    model_id = _model_row("alice")
    job_id = _job_of(model_id)
    with session_scope() as session:
        session.add(Metric(job_id=job_id, step=1, name="loss", value=2.0))
        session.add(JobLog(job_id=job_id, seq=1, attempt=1, level="info", logger="t", message="hello"))
        session.add(
            JobCheckpoint(
                job_id=job_id, step=1, storage_key=f"jobs/{job_id}/checkpoints/1", sha256="", size_bytes=1, metrics={}
            )
        )

    assert client.delete(f"/v1/jobs/{job_id}", headers=alice).status_code == 204
    assert client.get(f"/v1/jobs/{job_id}", headers=alice).status_code == 404
    assert client.delete(f"/v1/jobs/{job_id}", headers=alice).status_code == 404
    for table in (Metric, JobLog, JobCheckpoint):
        assert _count(table, job_id=job_id) == 0, table
    assert _count(ArtifactTombstone, kind="job", object_id=job_id) == 1
    model = client.get(f"/v1/models/{model_id}", headers=alice).json()
    assert (model["job_id"], model["job_deleted"]) == (job_id, True)
    assert client.get(f"/v1/models/{model_id}/anatomy", headers=alice).status_code == 200


def test_another_organisations_objects_are_404_to_delete(client, alice, make_key):
    bob = make_key("bob")
    model_id = _model_row("alice")
    job_id = _job_of(model_id)
    _register(client, alice, model_id, "en-de")
    for path, detail in (
        (f"/v1/jobs/{job_id}", f"job {job_id} not found"),
        (f"/v1/models/{model_id}", f"model {model_id} not found"),
        ("/v1/models/names/en-de?versions=delete", "model name en-de not found"),
    ):
        response = client.delete(path, headers=bob)
        assert (response.status_code, response.json()["detail"]) == (404, detail), path
    assert client.get(f"/v1/models/{model_id}", headers=alice).status_code == 200


def test_a_model_an_alias_points_at_is_409_naming_the_alias(client, alice):
    v1 = _model_row("alice")
    _register(client, alice, v1, "en-de")
    _point(client, alice, "en-de", "production", 1)
    response = client.delete(f"/v1/models/{v1}", headers=alice)
    assert response.status_code == 409, response.text
    assert response.json()["detail"].startswith(f"model {v1} is what en-de@production point(s) at")
    assert "?aliases=drop" in response.json()["detail"]
    assert client.get("/v1/models/en-de@production", headers=alice).json()["id"] == v1


def test_dropping_the_aliases_deletes_the_model_and_says_so(client, alice):
    v1 = _model_row("alice")
    _register(client, alice, v1, "en-de")
    _point(client, alice, "en-de", "production", 1)
    response = client.delete(f"/v1/models/{v1}?aliases=drop", headers=alice)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "id": v1,
        "aliases": [{"name": "en-de", "alias": "production", "action": "dropped", "model_id": None, "version": None}],
    }
    assert client.get("/v1/models/en-de@production", headers=alice).status_code == 404
    history = client.get("/v1/models/en-de/aliases/production/history", headers=alice).json()["data"]
    assert (history[0]["from_model_id"], history[0]["to_model_id"]) == (v1, None)


def test_moving_the_aliases_to_another_version(client, alice):
    v1, v2 = _model_row("alice"), _model_row("alice")
    _register(client, alice, v1, "en-de")
    _register(client, alice, v2, "en-de")
    _point(client, alice, "en-de", "production", 1)
    _point(client, alice, "en-de", "staging", 1)
    response = client.delete(f"/v1/models/{v1}?move_aliases_to=en-de@2", headers=alice)
    assert response.status_code == 200, response.text
    assert response.json()["aliases"] == [
        {"name": "en-de", "alias": "production", "action": "moved", "model_id": v2, "version": 2},
        {"name": "en-de", "alias": "staging", "action": "moved", "model_id": v2, "version": 2},
    ]
    assert client.get("/v1/models/en-de@production", headers=alice).json()["id"] == v2
    assert client.get(f"/v1/models/{v1}", headers=alice).status_code == 404
    history = client.get("/v1/models/en-de/aliases/staging/history", headers=alice).json()["data"]
    assert (history[0]["from_model_id"], history[0]["to_model_id"]) == (v1, v2)


def test_a_bad_move_target_is_422_naming_it(client, alice):
    v1, other = _model_row("alice"), _model_row("alice")
    _register(client, alice, v1, "en-de")
    _register(client, alice, other, "en-fr")
    _point(client, alice, "en-de", "production", 1)
    for query, message in (
        ("move_aliases_to=en-fr@1", "model en-fr@1 is not another version of en-de"),
        (f"move_aliases_to={v1}", f"model {v1} is the one being deleted"),
        ("move_aliases_to=nope", "model nope not found"),
        (f"move_aliases_to={other}&aliases=drop", None),
    ):
        response = client.delete(f"/v1/models/{v1}?{query}", headers=alice)
        assert response.status_code == 422, (query, response.text)
        if message is not None:
            assert response.json()["detail"][0]["msg"] == message
    assert client.delete(f"/v1/models/{v1}?aliases=keep", headers=alice).status_code == 422
    assert client.get(f"/v1/models/{v1}", headers=alice).status_code == 200


def test_deleting_a_name_with_versions_needs_versions_delete(client, alice):
    from app.db.tables import ArtifactTombstone

    v1, v2 = _model_row("alice"), _model_row("alice")
    _register(client, alice, v1, "en-de")
    _register(client, alice, v2, "en-de")
    _point(client, alice, "en-de", "production", 2)
    response = client.delete("/v1/models/names/en-de", headers=alice)
    assert response.status_code == 409, response.text
    assert response.json()["detail"] == (
        f"name en-de has versions en-de@1 ({v1}), en-de@2 ({v2}): ask for ?versions=delete to delete them with it"
    )

    response = client.delete("/v1/models/names/en-de?versions=delete", headers=alice)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "name": "en-de",
        "versions": [{"id": v1, "version": 1}, {"id": v2, "version": 2}],
        "aliases": [{"name": "en-de", "alias": "production", "action": "dropped", "model_id": None, "version": None}],
    }
    for model_id in (v1, v2):
        assert client.get(f"/v1/models/{model_id}", headers=alice).status_code == 404
        assert _count(ArtifactTombstone, kind="model", object_id=model_id) == 4  # weights, exports, evals, files
    assert client.get("/v1/models/en-de/aliases", headers=alice).status_code == 404
    assert client.delete("/v1/models/names/en-de", headers=alice).status_code == 404
    again = _model_row("alice")
    _register(client, alice, again, "en-de")
    assert client.get(f"/v1/models/{again}", headers=alice).json()["version"] == 1


def test_a_name_without_versions_goes_without_asking(client, alice):
    v1 = _model_row("alice")
    _register(client, alice, v1, "en-de")
    _register(client, alice, v1, "en-de-2")  # en-de is left with no version
    response = client.delete("/v1/models/names/en-de", headers=alice)
    assert response.status_code == 200, response.text
    assert response.json() == {"name": "en-de", "versions": [], "aliases": []}
    assert client.get(f"/v1/models/{v1}", headers=alice).json()["name"] == "en-de-2"


def test_the_lineage_says_a_parent_model_was_deleted(client, alice):
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    parent, child = _model_row("alice"), _model_row("alice")
    with session_scope() as session:
        session.get(TrainedModel, child).parent_model_id = parent
    assert client.get(f"/v1/models/{child}", headers=alice).json()["parent_model_deleted"] is False
    assert client.delete(f"/v1/models/{parent}", headers=alice).status_code == 200
    body = client.get(f"/v1/models/{child}", headers=alice).json()
    assert (body["parent_model_id"], body["parent_model_deleted"]) == (parent, True)
    listed = client.get("/v1/models", headers=alice).json()["data"]
    assert [m["parent_model_deleted"] for m in listed] == [True]


def test_the_lineage_says_a_parent_dataset_was_deleted(client, alice, parallel_id):
    from app.db.session import session_scope
    from app.db.tables import Dataset

    with session_scope() as session:
        parent = session.get(Dataset, parallel_id)
        child = Dataset(
            owner_id=parent.owner_id,
            name="filtered",
            kind=parent.kind,
            format=parent.format,
            rows=0,
            size_bytes=0,
            sha256="",
            stats={},
            storage_key="",
            parent_id=parallel_id,
        )
        session.add(child)
        session.flush()
        child_id = child.id
    assert client.get(f"/v1/datasets/{child_id}", headers=alice).json()["parent_deleted"] is False
    assert client.delete(f"/v1/datasets/{parallel_id}", headers=alice).status_code == 204
    body = client.get(f"/v1/datasets/{child_id}", headers=alice).json()
    assert (body["parent_id"], body["parent_deleted"]) == (parallel_id, True)


def test_on_postgresql_a_job_a_model_and_a_name_are_deleted_whole(pg):
    from app.db.run_record_tables import Metric
    from app.db.tables import ArtifactTombstone

    client, alice = pg
    v1, v2 = _model_row("alice"), _model_row("alice")
    job_id = _job_of(v1)
    _register(client, alice, v1, "en-de")
    _register(client, alice, v2, "en-de")
    _point(client, alice, "en-de", "production", 1)
    _set_job(job_id, status="running")
    assert client.delete(f"/v1/jobs/{job_id}", headers=alice).status_code == 409
    _set_job(job_id, status="failed")
    assert client.delete(f"/v1/jobs/{job_id}", headers=alice).status_code == 204
    assert _count(Metric, job_id=job_id) == 0
    assert client.get(f"/v1/models/{v1}", headers=alice).json()["job_deleted"] is True

    moved = client.delete(f"/v1/models/{v1}?move_aliases_to={v2}", headers=alice)
    assert moved.status_code == 200, moved.text
    assert moved.json()["aliases"][0]["model_id"] == v2
    names = client.delete("/v1/models/names/en-de?versions=delete", headers=alice)
    assert names.status_code == 200, names.text
    assert [v["id"] for v in names.json()["versions"]] == [v2]
    assert _count(ArtifactTombstone) == 1 + 4 + 4  # the job's prefix, then each model's four


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
