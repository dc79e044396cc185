"""The rows behind the reaper's sweep of datasets stuck in `processing` (app/db/dataset_rows.py), and its races with
another reaper and with a worker that finishes late, on a migrated SQLite database in process;
tests/reliability/test_dataset_reaper.py runs the sweep itself through Celery workers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.db import dataset_rows
from app.db.base import utcnow
from app.db.keys import create_key
from app.db.session import session_scope
from app.db.tables import Dataset
from tests.support.api_app import migrated_client
from worker.data.ingest import finish

TIMEOUT = timedelta(seconds=60)


@pytest.fixture
def owner_id(settings_env):
    with migrated_client():
        with session_scope() as session:
            row, _ = create_key(session, "gina")
            owner = row.owner_id
        yield owner


def _dataset(owner_id: str, age: timedelta, status: str = "processing", **values) -> str:
    with session_scope() as session:
        dataset = Dataset(
            owner_id=owner_id, name="d", kind="parallel", format="auto", rows=0, size_bytes=1, sha256="", stats={},
            storage_key="k", status=status, created_at=utcnow() - age, **values,
        )  # fmt: skip
        session.add(dataset)
        session.commit()
        return dataset.id


def _stuck() -> list[dataset_rows.Stuck]:
    with session_scope() as session:
        return dataset_rows.stuck(session, TIMEOUT)


def test_stuck_means_processing_longer_than_the_timeout_since_its_task_was_last_sent(owner_id):
    old = _dataset(owner_id, timedelta(minutes=5))
    _dataset(owner_id, timedelta(seconds=10))  # just sent
    _dataset(owner_id, timedelta(minutes=5), status="ready")
    _dataset(owner_id, timedelta(minutes=5), dispatched_at=utcnow())  # sent again a moment ago
    filtered = _dataset(owner_id, timedelta(minutes=4), filter_rules={"deduplicate": True}, attempt=2)
    assert _stuck() == [dataset_rows.Stuck(old, 1, False), dataset_rows.Stuck(filtered, 2, True)]


def test_the_first_of_the_reaper_and_a_late_worker_to_record_an_outcome_wins(owner_id):
    _dataset(owner_id, timedelta(minutes=5))
    (stuck,) = _stuck()
    with session_scope() as session:
        assert dataset_rows.mark_sent_again(session, stuck)
        assert not dataset_rows.mark_sent_again(session, stuck)  # another reaper read the same attempt: no resend
    assert _stuck() == []  # its clock starts again
    assert finish(stuck.id, status="failed", error="sent 2 times ...")  # the reaper gives up
    assert not finish(stuck.id, status="ready", rows=3)  # the worker that finishes late changes nothing
    with session_scope() as session:
        dataset = session.get(Dataset, stuck.id)
        assert dataset is not None and (dataset.status, dataset.attempt, dataset.rows) == ("failed", 2, 0)
    late = _dataset(owner_id, timedelta(minutes=5))
    assert finish(late, status="ready", rows=3)  # a worker that finishes first
    assert _stuck() == [] and not finish(late, status="failed", error="too late")  # nothing left for the reaper
