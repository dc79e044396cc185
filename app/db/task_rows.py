"""The states of background work on a model (an Evaluation, a FileTranslation, a DatasetTranslation), each change
one conditional UPDATE: queued -> running -> succeeded | failed.

A redelivered task may claim a running row again (its worker died mid-way; the work is redone from the start
and gives the same result, or, for a dataset translation, resumed after the parts already written); a finished one
is never claimed again. A running row whose progress stalled is what a dead worker leaves: the reaper finds it
(`stalled`) and sends its task again (`sent_again`, counted in `attempt`), or fails it after the last send.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from app.db.background_tables import Evaluation, FileTranslation
from app.db.base import utcnow
from app.db.dataset_translation_tables import DatasetTranslation

QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"
Table = type[Evaluation] | type[FileTranslation] | type[DatasetTranslation]


def _changed(
    session: Session, table: Table, row_id: str, states: tuple[str, ...], *conditions: Any, **values: Any
) -> bool:
    result = session.execute(
        update(table)
        .where(table.id == row_id, table.status.in_(states), *conditions)
        .values(updated_at=utcnow(), **values)
    )
    session.commit()
    return bool(result.rowcount) if isinstance(result, CursorResult) else False


def claim(session: Session, table: Table, row_id: str, **values: Any) -> bool:
    """queued (or running, on redelivery) -> running, with `values` (sizes; `translated`, where the work resumes,
    else 0); False once it is over or gone."""
    return _changed(
        session, table, row_id, (QUEUED, RUNNING), **{"status": RUNNING, "translated": 0, "started_at": utcnow(),
                                                      "error": None, **values},
    )  # fmt: skip


def progress(session: Session, table: Table, row_id: str, translated: int) -> bool:
    return _changed(session, table, row_id, (RUNNING,), translated=translated)


def succeed(session: Session, table: Table, row_id: str, **values: Any) -> bool:
    return _changed(session, table, row_id, (RUNNING,), status=SUCCEEDED, finished_at=utcnow(), **values)


def fail(session: Session, table: Table, row_id: str, error: str) -> bool:
    return _changed(session, table, row_id, (QUEUED, RUNNING), status=FAILED, error=error, finished_at=utcnow())


def stalled(
    session: Session, table: Table, older_than: timedelta, now: datetime | None = None
) -> list[tuple[str, int]]:
    """(id, attempt) of the running rows whose last change (claim or progress) is older than `older_than`, oldest
    first."""
    cutoff = (now or utcnow()) - older_than
    rows = session.execute(
        select(table.id, table.attempt)
        .where(table.status == RUNNING, table.updated_at < cutoff)
        .order_by(table.updated_at)
    )
    return [(row_id, attempt) for row_id, attempt in rows]


def sent_again(session: Session, table: Table, row_id: str, attempt: int) -> bool:
    """Count one more send of a stalled row's task (its progress clock restarts); False when another reaper did, or
    the row moved on. Commits: the message goes after."""
    return _changed(session, table, row_id, (RUNNING,), table.attempt == attempt, attempt=attempt + 1)
