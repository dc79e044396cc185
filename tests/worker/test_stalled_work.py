"""The reaper's sweep of background work whose worker died (worker/reaper.py sweep_stalled, app/db/task_rows.py):
running rows whose progress stopped are sent again to the inference queue, once per stall whatever the number of
reapers, and failed after the last send naming why, on a migrated SQLite database in process;
tests/reliability/test_stalled_translation.py kills a real worker mid-translation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from app.core.settings import get_settings
from app.core.task_names import EVALUATE, INFERENCE_QUEUE, TRANSLATE_DATASET, TRANSLATE_FILE
from app.db import task_rows
from app.db.background_tables import Evaluation, FileTranslation
from app.db.base import utcnow
from app.db.dataset_translation_tables import DatasetTranslation
from app.db.keys import create_key
from app.db.session import session_scope
from app.db.tables import Dataset, TrainedModel
from app.db.webhook_tables import WebhookDelivery, WebhookEndpoint
from tests.support.api_app import migrated_client
from worker import reaper


class Sender:
    """What the reaper sends, in order: (task name, args, queue)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any], str]] = []

    def send_task(self, name: str, args: list[Any], queue: str) -> None:
        self.sent.append((name, args, queue))


@pytest.fixture
def owned(settings_env):
    """An owner's model and dataset, on a migrated database; stalls after 60 s, three sends at most."""
    settings_env(BACKGROUND_STALL_SECONDS="60", BACKGROUND_MAX_ATTEMPTS="3")
    with migrated_client():
        with session_scope() as session:
            key, _ = create_key(session, "hana")
            model = TrainedModel(
                owner_id=key.owner_id, objective="translation", config={}, tokenizer_fingerprint="f", metrics={},
                source="last@1", parameters=1, storage_key="models/x", sha256="0" * 64, size_bytes=1,
            )  # fmt: skip
            dataset = Dataset(
                owner_id=key.owner_id, name="d", kind="parallel", format="auto", rows=0, size_bytes=1, sha256="",
                stats={}, storage_key="k", status="ready",
            )  # fmt: skip
            session.add_all([model, dataset])
            session.commit()
            yield {"owner_id": key.owner_id, "model_id": model.id, "dataset_id": dataset.id}


def _row(owned: dict[str, str], table: task_rows.Table, age: timedelta, status: str = "running", **values) -> str:
    common = {"owner_id": owned["owner_id"], "model_id": owned["model_id"], "settings": {}, "status": status}
    extra: dict[str, Any] = {
        Evaluation: {"dataset_id": owned["dataset_id"]},
        FileTranslation: {"filename": "a.txt", "source_key": "k"},
        DatasetTranslation: {"dataset_id": owned["dataset_id"]},
    }[table]
    with session_scope() as session:
        row = table(**common, **extra, updated_at=utcnow() - age, **values)
        session.add(row)
        session.commit()
        return row.id


def _state(table: task_rows.Table, row_id: str) -> tuple[str, int, str | None]:
    with session_scope() as session:
        row = session.get(table, row_id)
        assert row is not None
        return row.status, row.attempt, row.error


def test_stalled_rows_of_each_kind_are_sent_again_once_and_their_clock_restarts(owned):
    evaluation = _row(owned, Evaluation, timedelta(minutes=5))
    file = _row(owned, FileTranslation, timedelta(minutes=2))
    dataset = _row(owned, DatasetTranslation, timedelta(minutes=3), attempt=2)
    _row(owned, Evaluation, timedelta(seconds=10))  # progress a moment ago
    _row(owned, DatasetTranslation, timedelta(minutes=5), status="queued")  # waiting for a worker: not stalled
    _row(owned, FileTranslation, timedelta(minutes=5), status="succeeded")
    first, second = Sender(), Sender()
    assert reaper.sweep_stalled(first, get_settings(), force=True) == ([evaluation, file, dataset], [])
    assert first.sent == [
        (EVALUATE, [evaluation], INFERENCE_QUEUE),
        (TRANSLATE_FILE, [file], INFERENCE_QUEUE),
        (TRANSLATE_DATASET, [dataset], INFERENCE_QUEUE),
    ]
    assert _state(Evaluation, evaluation) == ("running", 2, None) and _state(DatasetTranslation, dataset)[1] == 3
    assert reaper.sweep_stalled(second, get_settings(), force=True) == ([], []) and second.sent == []


def test_two_reapers_that_read_the_same_stall_send_it_once(owned):
    row_id = _row(owned, DatasetTranslation, timedelta(minutes=5))
    with session_scope() as session:
        ((found, attempt),) = task_rows.stalled(session, DatasetTranslation, timedelta(seconds=60))
        assert found == row_id and task_rows.sent_again(session, DatasetTranslation, row_id, attempt)
        assert not task_rows.sent_again(session, DatasetTranslation, row_id, attempt)  # the other reaper: no send


def test_a_row_stalled_after_its_last_send_fails_naming_why_and_an_evaluation_emits_its_event(owned):
    with session_scope() as session:
        session.add(WebhookEndpoint(owner_id=owned["owner_id"], url="http://127.0.0.1:9/h", secret="whsec_" + "s" * 32,
                                    events=["evaluation.failed"]))  # fmt: skip
        session.commit()
    evaluation = _row(owned, Evaluation, timedelta(minutes=5), attempt=3)
    dataset = _row(owned, DatasetTranslation, timedelta(minutes=5), attempt=3)
    sender = Sender()
    assert reaper.sweep_stalled(sender, get_settings(), force=True) == ([], [evaluation, dataset])
    assert sender.sent == []
    status, attempt, error = _state(DatasetTranslation, dataset)
    assert (status, attempt) == ("failed", 3) and error == (
        "its task was sent 3 times and each time its progress stopped for BACKGROUND_STALL_SECONDS=60 "
        "(its worker died); ask again"
    )
    with session_scope() as session:
        events = [d.event_type for d in session.query(WebhookDelivery)]
    assert events == ["evaluation.failed"]
