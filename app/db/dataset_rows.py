"""Datasets stuck in `processing`: the rows the reaper sends again or fails (worker/reaper.py).

A dataset's parse is sent once, at upload (app/services/datasets.py). Were its worker to die mid-parse, or its
message be lost, it would stay processing for ever, and the jobs on it would wait with it. So a dataset still
processing DATASET_PROCESSING_TIMEOUT_SECONDS after its task was last sent is sent again, its attempt counted by a
conditional UPDATE on the attempt it was read at (two reapers send it once); once sent DATASET_MAX_ATTEMPTS times it
is failed instead, by the conditional UPDATE a worker records its outcome with (worker.data.ingest.finish), so that
whichever of the reaper and a late worker comes first wins, and the dataset.failed webhook goes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.tables import Dataset


@dataclass(frozen=True)
class Stuck:
    id: str
    attempt: int  # how many times its task was sent
    filtered: bool  # made by filtering another dataset: its task is the filter's, not the parse's


def stuck(session: Session, older_than: timedelta, now: datetime | None = None) -> list[Stuck]:
    """Datasets processing for longer than `older_than` since their task was last sent, oldest first."""
    now = now or utcnow()
    sent_at = func.coalesce(Dataset.dispatched_at, Dataset.created_at)
    rows = session.execute(
        select(Dataset.id, Dataset.attempt, Dataset.filter_rules.is_not(None))
        .where(Dataset.status == "processing", sent_at < now - older_than)
        .order_by(sent_at)
    )
    return [Stuck(id, attempt, bool(filtered)) for id, attempt, filtered in rows]


def mark_sent_again(session: Session, dataset: Stuck, now: datetime | None = None) -> bool:
    """Count one more send of a stuck dataset's task; False when another reaper did, or it is no longer
    processing. Commits: the message goes after."""
    done = session.execute(
        update(Dataset)
        .where(Dataset.id == dataset.id, Dataset.status == "processing", Dataset.attempt == dataset.attempt)
        .values(attempt=dataset.attempt + 1, dispatched_at=now or utcnow())
    )
    session.commit()
    return bool(getattr(done, "rowcount", 0))
