"""Deleting jobs, models and names: what is refused (409 naming why), what goes, what stays, and what the lineage
says afterwards. Datasets: tests/api/test_dataset_deletion.py."""

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
