"""Job lifecycle in the database, shared by the API and the workers.

Every transition is a conditional UPDATE, so two processes never both win: a redelivered task finds the
job already claimed, a worker that lost its lease finds its updates refused, a reaper and a finishing
worker cannot both move the same job.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Result, and_, func, or_, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.tables import Job, Worker

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
PRUNED = "pruned"  # a sweep's trial stopped at an evaluation because its pruner ranked it too low (sweep_runner.py)
ACTIVE_STATES = (QUEUED, RUNNING)
TERMINAL_STATES = (SUCCEEDED, FAILED, CANCELLED, PRUNED)


def _rowcount(result: Result[Any]) -> int:
    """Rows an UPDATE matched (Session.execute is typed as returning Result; DML gives a CursorResult)."""
    return cast("CursorResult[Any]", result).rowcount


@dataclass(frozen=True)
class Claim:
    job_id: str
    worker: str  # "<celery hostname>/<pid>"
    attempt: int

    @property
    def hostname(self) -> str:
        return self.worker.rsplit("/", 1)[0]


def claim(session: Session, job_id: str, worker: str, lease_seconds: int) -> Claim | None:
    """queued -> running for `worker` with a fresh lease; None if someone else has it or it is over."""
    now = utcnow()
    done = _rowcount(
        session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == QUEUED, Job.cancel_requested.is_(False))
            .values(
                status=RUNNING,
                worker=worker,
                attempt=Job.attempt + 1,
                lease_expires_at=now + timedelta(seconds=lease_seconds),
                started_at=func.coalesce(Job.started_at, now),
                updated_at=now,
                error=None,
            )
        )
    )
    session.commit()
    if not done:
        return None
    attempt = session.scalar(select(Job.attempt).where(Job.id == job_id))
    assert attempt is not None  # the row was just claimed
    return Claim(job_id, worker, attempt)


@dataclass(frozen=True)
class LeaseState:
    held: bool  # False: the lease was lost (expired and reaped); stop without writing anything
    cancel_requested: bool
    preempt_requested: bool = False  # the worker is draining (shutting down): checkpoint and release the job


def renew(session: Session, c: Claim, lease_seconds: int, **progress: Any) -> LeaseState:
    """Extend the lease and write progress, only while this worker still holds the job (no commit)."""
    now = utcnow()
    held = _rowcount(
        session.execute(
            update(Job)
            .where(Job.id == c.job_id, Job.status == RUNNING, Job.worker == c.worker, Job.attempt == c.attempt)
            .values(lease_expires_at=now + timedelta(seconds=lease_seconds), updated_at=now, **progress)
        )
    )
    cancel = bool(session.scalar(select(Job.cancel_requested).where(Job.id == c.job_id)))
    draining = bool(session.scalar(select(Worker.draining).where(Worker.hostname == c.hostname)))
    return LeaseState(held=bool(held), cancel_requested=cancel, preempt_requested=draining)


def finish(session: Session, c: Claim, status: str, error: str | None = None, **values: Any) -> bool:
    """running -> a terminal state, only by the lease holder. Does not commit (callers add rows with it)."""
    now = utcnow()
    return bool(
        _rowcount(
            session.execute(
                update(Job)
                .where(Job.id == c.job_id, Job.status == RUNNING, Job.worker == c.worker, Job.attempt == c.attempt)
                .values(
                    status=status,
                    error=error,
                    finished_at=now,
                    updated_at=now,
                    lease_expires_at=None,
                    eta_seconds=None,
                    **values,
                )
            )
        )
    )


def record_auto_settings(
    session: Session,
    c: Claim,
    model_config: dict[str, Any],
    training_config: dict[str, Any],
    auto_settings: dict[str, Any],
) -> bool:
    """The lease holder writes the settings it chose from the time budget into the job, once: a later attempt
    finds them recorded and trains with them. Commits."""
    held = _rowcount(
        session.execute(
            update(Job)
            .where(Job.id == c.job_id, Job.status == RUNNING, Job.worker == c.worker, Job.attempt == c.attempt)
            .values(
                model_config=model_config,
                training_config=training_config,
                auto_settings=auto_settings,
                total_steps=training_config["max_steps"],
                updated_at=utcnow(),
            )
        )
    )
    session.commit()
    return bool(held)


def release(session: Session, c: Claim, reason: str, refund_attempt: bool = False) -> bool:
    """running -> queued by the lease holder itself: a crash to retry, or (refund_attempt) a worker shutting down
    after a checkpoint, which does not count against the job's max_attempts."""
    now = utcnow()
    done = _rowcount(
        session.execute(
            update(Job)
            .where(Job.id == c.job_id, Job.status == RUNNING, Job.worker == c.worker, Job.attempt == c.attempt)
            .values(
                status=QUEUED,
                worker=None,
                lease_expires_at=None,
                dispatched_at=None,
                updated_at=now,
                error=reason,
                attempt=Job.attempt - 1 if refund_attempt else Job.attempt,
                eta_seconds=None,
            )
        )
    )
    session.commit()
    return bool(done)


def request_cancel(session: Session, job: Job) -> bool:
    """Queued jobs are cancelled at once (True); running ones when their worker next renews its lease."""
    now = utcnow()
    cancelled = _rowcount(
        session.execute(
            update(Job)
            .where(Job.id == job.id, Job.status == QUEUED)
            .values(status=CANCELLED, cancel_requested=True, finished_at=now, updated_at=now)
        )
    )
    session.execute(
        update(Job).where(Job.id == job.id, Job.status == RUNNING).values(cancel_requested=True, updated_at=now)
    )
    session.commit()
    session.refresh(job)
    return bool(cancelled)


def set_draining(session: Session, hostname: str) -> None:
    """A worker going away: its running jobs checkpoint and release themselves at their next lease renewal."""
    session.execute(update(Worker).where(Worker.hostname == hostname).values(draining=True))
    session.commit()


def mark_dispatched(session: Session, job_id: str) -> None:
    session.execute(update(Job).where(Job.id == job_id, Job.status == QUEUED).values(dispatched_at=utcnow()))
    session.commit()


def reap_expired(session: Session, now: datetime | None = None) -> tuple[list[str], list[str]]:
    """Jobs whose lease expired: back to the queue (attempt < max), failed, or cancelled if a cancel was asked for.
    Returns (requeued, ended)."""
    now = now or utcnow()
    expired = session.scalars(select(Job).where(Job.status == RUNNING, Job.lease_expires_at < now)).all()
    requeued: list[str] = []
    failed: list[str] = []
    for job in expired:
        lost = f"worker {job.worker} stopped renewing its lease during attempt {job.attempt}"
        guard = and_(Job.id == job.id, Job.status == RUNNING, Job.attempt == job.attempt, Job.lease_expires_at < now)
        if job.cancel_requested:  # its owner asked to stop it: cancelled, not queued again (nothing would claim it)
            values = dict(status=CANCELLED, finished_at=now, error=f"{lost}; cancelled as asked")
            target = failed
        elif job.attempt >= job.max_attempts:
            values = dict(status=FAILED, finished_at=now, error=f"{lost}; gave up after {job.attempt} attempts")
            target = failed
        else:
            values = dict(status=QUEUED, dispatched_at=None, error=f"{lost}; retrying")
            target = requeued
        if _rowcount(
            session.execute(
                update(Job).where(guard).values(worker=None, lease_expires_at=None, updated_at=now, **values)
            )
        ):
            target.append(job.id)
    session.commit()
    return requeued, failed


def undispatched(session: Session, older_than: timedelta, now: datetime | None = None) -> list[str]:
    """Queued jobs whose message was never sent, or sent so long ago that it may have been lost."""
    now = now or utcnow()
    return list(
        session.scalars(
            select(Job.id)
            .where(
                Job.status == QUEUED,
                Job.cancel_requested.is_(False),
                or_(Job.dispatched_at.is_(None), Job.dispatched_at < now - older_than),
            )
            .order_by(Job.created_at)
        )
    )
