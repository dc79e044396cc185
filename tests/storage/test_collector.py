"""The collector deletes the files of deleted rows from the artifact store, locally and on S3 (moto), and nothing
else.

Fault: a job is deleted; its checkpoints, and a deleted model's weights and exports, are left in the store.
Pass: once the grace period has passed the reaper sends their tombstones to the collector, which deletes exactly
those prefixes; a message delivered twice is a no-op; before the grace period, or while a queued job starts from a
deleted model, the files stay.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_init_model import _model_row
from tests.support.api_app import migrated_client


class Sender:
    """Stands in for Celery: records what the reaper sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any], str]] = []

    def send_task(self, name: str, args: list[Any], queue: str) -> None:
        self.sent.append((name, args, queue))


@pytest.fixture(params=["local", "s3"])
def api(request, settings_env):
    env = {"ARTIFACT_GRACE_SECONDS": "0"}
    if request.param == "s3":
        s3_server = request.getfixturevalue("s3_server")
        bucket = s3_server.bucket_name()
        env |= {**s3_server.env, "ARTIFACT_ROOT": f"s3://{bucket}/store"}
    settings_env(**env)
    from app.db.keys import create_key
    from app.db.session import session_scope

    with migrated_client() as client:
        with session_scope() as session:
            _row, clear = create_key(session, "alice")
        yield client, {"Authorization": f"Bearer {clear}"}


def _stored_model() -> tuple[str, str]:
    """A succeeded job and its model, with files in the store: (job id, model id)."""
    from app.artifacts import get_store
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    model_id = _model_row("alice")
    with session_scope() as session:
        model = session.get(TrainedModel, model_id)
        model.storage_key = f"models/{model_id}"
        job_id = model.job_id
    store = get_store()
    store.write_bytes(f"jobs/{job_id}/checkpoints/step-00000001/manifest.json", b"{}")
    store.write_bytes(f"models/{model_id}/model.safetensors", b"weights")
    store.write_bytes(f"exports/{model_id}/1/native.tar.gz", b"archive")
    return job_id, model_id


def _collect() -> list[str]:
    from app.core.settings import get_settings
    from worker import reaper
    from worker.tasks.collect import collect_artifacts

    sender = Sender()
    ids = reaper.send_due_collections(sender, get_settings(), force=True)  # type: ignore[arg-type]
    assert [(name, queue) for name, _args, queue in sender.sent] == (
        [("service.collect_artifacts", "data")] if ids else []
    )
    deleted: list[str] = []
    for _name, args, _queue in sender.sent:
        deleted += collect_artifacts(*args)
        assert collect_artifacts(*args) == []  # delivered twice: nothing left to do
    return deleted


def test_a_deleted_jobs_files_are_collected_and_its_models_stay(api):
    from app.artifacts import get_store

    client, alice = api
    job_id, model_id = _stored_model()
    other_job, _other_model = _stored_model()
    assert client.delete(f"/v1/jobs/{job_id}", headers=alice).status_code == 204
    assert get_store().exists(f"jobs/{job_id}")  # left to the collector

    assert _collect() == [f"jobs/{job_id}"]
    assert not get_store().exists(f"jobs/{job_id}")
    assert get_store().exists(f"jobs/{other_job}")
    assert get_store().exists(f"models/{model_id}")  # the model it trained keeps serving
    assert _collect() == []


def test_a_deleted_models_files_and_exports_are_collected(api):
    from app.artifacts import get_store

    client, alice = api
    _job_id, model_id = _stored_model()
    assert client.delete(f"/v1/models/{model_id}", headers=alice).status_code == 200
    assert sorted(_collect()) == sorted(
        [f"models/{model_id}", f"exports/{model_id}", f"evaluations/{model_id}", f"translations/{model_id}"]
    )
    assert not get_store().exists(f"models/{model_id}") and not get_store().exists(f"exports/{model_id}")


def test_nothing_is_collected_before_the_grace_period(api, settings_env, monkeypatch):
    from app.artifacts import get_store
    from app.core.settings import get_settings

    client, alice = api
    job_id, _model_id = _stored_model()
    assert client.delete(f"/v1/jobs/{job_id}", headers=alice).status_code == 204
    monkeypatch.setenv("ARTIFACT_GRACE_SECONDS", "3600")
    get_settings.cache_clear()
    assert _collect() == []
    assert get_store().exists(f"jobs/{job_id}")


def test_a_deleted_model_that_a_queued_job_starts_from_is_kept(api):
    from app.artifacts import get_store
    from app.db.session import session_scope
    from app.db.tables import Job

    client, alice = api
    job_id, model_id = _stored_model()
    assert client.delete(f"/v1/models/{model_id}", headers=alice).status_code == 200
    with session_scope() as session:
        job = session.get(Job, job_id)
        session.add(
            Job(
                owner_id=job.owner_id,
                objective=job.objective,
                model_config={},
                training_config={},
                status="queued",
                max_attempts=3,
                total_steps=1,
                request_sha256="",
                init_model_id=model_id,
            )
        )
    assert _collect() == []
    assert get_store().exists(f"models/{model_id}")
