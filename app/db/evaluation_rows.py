"""The states of an evaluation, each change one conditional UPDATE: queued -> running -> succeeded | failed.

A redelivered task may claim a running evaluation again (its worker died mid-way; the work is redone from the
start, and gives the same hypotheses); a finished one is never claimed again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import CursorResult, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Evaluation

QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"


def _changed(session: Session, evaluation_id: str, states: tuple[str, ...], **values: Any) -> bool:
    result = session.execute(
        update(Evaluation)
        .where(Evaluation.id == evaluation_id, Evaluation.status.in_(states))
        .values(updated_at=utcnow(), **values)
    )
    session.commit()
    return bool(result.rowcount) if isinstance(result, CursorResult) else False


def claim(session: Session, evaluation_id: str, sentences: int) -> bool:
    """queued (or running, on redelivery) -> running; False once it is over or gone."""
    return _changed(
        session, evaluation_id, (QUEUED, RUNNING), status=RUNNING, sentences=sentences, translated=0,
        started_at=utcnow(), error=None,
    )  # fmt: skip


def progress(session: Session, evaluation_id: str, translated: int) -> bool:
    return _changed(session, evaluation_id, (RUNNING,), translated=translated)


def succeed(session: Session, evaluation_id: str, scores: dict[str, Any], hypotheses_key: str) -> bool:
    return _changed(
        session, evaluation_id, (RUNNING,), status=SUCCEEDED, scores=scores, hypotheses_key=hypotheses_key,
        finished_at=utcnow(),
    )  # fmt: skip


def fail(session: Session, evaluation_id: str, error: str) -> bool:
    return _changed(session, evaluation_id, (QUEUED, RUNNING), status=FAILED, error=error, finished_at=utcnow())
