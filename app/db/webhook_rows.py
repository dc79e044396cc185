"""A webhook delivery's states, each change one conditional UPDATE, shared by the API, the worker and the reaper.

    pending ──attempt──> succeeded
       │                 ▲
       └──> retrying ────┘   (an attempt failed and another is scheduled at next_attempt_at)
               └──────────> failed (the last attempt failed, or the endpoint was disabled)

An attempt first claims the row (attempts + 1, `locked_until` set): a second message for the same delivery, the
reaper's and a countdown's, or one redelivered by the broker, finds it locked, not due or over, and does nothing.
Only the attempt that claimed it records its outcome. A worker that dies mid-attempt leaves a lock that expires;
the reaper then sends the delivery's message again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, Result, and_, case, delete, or_, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.webhook_tables import WebhookDelivery

PENDING, RETRYING, SUCCEEDED, FAILED = "pending", "retrying", "succeeded", "failed"
OPEN_STATES = (PENDING, RETRYING)
STATES = (PENDING, RETRYING, SUCCEEDED, FAILED)


def _rowcount(result: Result[Any]) -> int:
    return cast("CursorResult[Any]", result).rowcount


def _unlocked(now: datetime) -> ColumnElement[bool]:
    return or_(WebhookDelivery.locked_until.is_(None), WebhookDelivery.locked_until < now)


def next_wait(attempts: int, max_attempts: int, schedule: tuple[float, ...]) -> float | None:
    """Seconds before the next attempt after attempt number `attempts` failed; None when that was the last. A
    delivery made under a longer schedule than today's waits the last wait again."""
    if attempts >= max_attempts or not schedule:
        return None
    return schedule[min(attempts, len(schedule)) - 1]


def claim(session: Session, delivery_id: str, lock_seconds: float, now: datetime | None = None) -> int | None:
    """A due, open delivery that no attempt holds -> attempts + 1, locked for `lock_seconds`. Returns the attempt's
    number; None when it is not due, over, being sent or gone. Commits."""
    now = now or utcnow()
    claimed = _rowcount(
        session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.id == delivery_id,
                WebhookDelivery.status.in_(OPEN_STATES),
                WebhookDelivery.next_attempt_at <= now,
                _unlocked(now),
            )
            .values(
                attempts=WebhookDelivery.attempts + 1,
                locked_until=now + timedelta(seconds=lock_seconds),
                updated_at=now,
            )
        )
    )
    session.commit()
    if not claimed:
        return None
    return session.scalar(select(WebhookDelivery.attempts).where(WebhookDelivery.id == delivery_id))


def record(
    session: Session,
    delivery_id: str,
    attempt: int,
    *,
    succeeded: bool,
    status_code: int | None,
    latency_ms: float | None,
    error: str | None,
    retry_at: datetime | None,
    task_due_at: datetime | None,
) -> bool:
    """Attempt `attempt`'s outcome, written only while that attempt holds the delivery: succeeded, retrying at
    `retry_at` (its message due at `task_due_at`, None: the reaper sends it), or failed. Commits."""
    status = SUCCEEDED if succeeded else RETRYING if retry_at is not None else FAILED
    now = utcnow()
    done = _rowcount(
        session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.id == delivery_id,
                WebhookDelivery.attempts == attempt,
                WebhookDelivery.locked_until.is_not(None),
            )
            .values(
                status=status,
                last_status_code=status_code,
                last_latency_ms=latency_ms,
                last_error=error,
                next_attempt_at=None if succeeded else retry_at,
                locked_until=None,
                task_due_at=None if succeeded else task_due_at,
                updated_at=now,
            )
        )
    )
    session.commit()
    return bool(done)


def give_up(session: Session, delivery_id: str, reason: str) -> bool:
    """An open delivery no attempt holds -> failed without sending (its endpoint was disabled). Commits."""
    now = utcnow()
    done = _rowcount(
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery_id, WebhookDelivery.status.in_(OPEN_STATES), _unlocked(now))
            .values(status=FAILED, last_error=reason, next_attempt_at=None, task_due_at=None, updated_at=now)
        )
    )
    session.commit()
    return bool(done)


def redeliver(session: Session, delivery_id: str, now: datetime | None = None) -> bool:
    """A new attempt now, unless one is being made (False). An open delivery keeps its retries; one that is over
    (succeeded or failed) gets this one attempt more. Its message is to be sent now. Does not commit."""
    now = now or utcnow()
    over = WebhookDelivery.status.in_((SUCCEEDED, FAILED))
    return bool(
        _rowcount(
            session.execute(
                update(WebhookDelivery)
                .where(WebhookDelivery.id == delivery_id, _unlocked(now))
                .values(
                    status=PENDING,
                    next_attempt_at=now,
                    locked_until=None,  # a lock that expired: its attempt, if it still ends, records nothing
                    task_due_at=now,
                    max_attempts=case((over, WebhookDelivery.attempts + 1), else_=WebhookDelivery.max_attempts),
                    updated_at=now,
                )
            )
        )
    )


def _needs_message(now: datetime, redispatch: timedelta) -> ColumnElement[bool]:
    """Due, held by no attempt, and no task message on its way: none was sent (a wait too long to be a countdown,
    or a broker away when it was), or the last one was due `redispatch` ago and no worker took it."""
    return and_(
        WebhookDelivery.status.in_(OPEN_STATES),
        WebhookDelivery.next_attempt_at <= now,
        _unlocked(now),
        or_(WebhookDelivery.task_due_at.is_(None), WebhookDelivery.task_due_at < now - redispatch),
    )


def take_unsent(session: Session, redispatch: timedelta, limit: int = 500, now: datetime | None = None) -> list[str]:
    """The deliveries whose message the caller is to send now, oldest due first, each marked sent by one conditional
    UPDATE, so of several reapers one sends it. Commits."""
    now = now or utcnow()
    candidates = session.scalars(
        select(WebhookDelivery.id)
        .where(_needs_message(now, redispatch))
        .order_by(WebhookDelivery.next_attempt_at)
        .limit(limit)
    ).all()
    taken = []
    for delivery_id in candidates:
        if _rowcount(
            session.execute(
                update(WebhookDelivery)
                .where(WebhookDelivery.id == delivery_id, _needs_message(now, redispatch))
                .values(task_due_at=now)
            )
        ):
            taken.append(delivery_id)
    session.commit()
    return taken


def delete_finished(session: Session, older_than: timedelta, now: datetime | None = None) -> int:
    """Remove deliveries that ended (succeeded or failed) before `older_than` ago; returns how many. Commits."""
    cutoff = (now or utcnow()) - older_than
    removed = _rowcount(
        session.execute(
            delete(WebhookDelivery).where(
                WebhookDelivery.status.in_((SUCCEEDED, FAILED)), WebhookDelivery.updated_at < cutoff
            )
        )
    )
    session.commit()
    return removed
