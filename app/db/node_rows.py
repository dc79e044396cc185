"""Rows of a multi-host job's nodes (tables.JobNode): who joined which attempt, and what became of each."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.job_rows import RUNNING
from app.db.tables import Job, JobNode


def join(session: Session, job_id: str, attempt: int, node_rank: int, worker: str) -> bool:
    """Take node `node_rank` of the job's attempt for `worker`, while that attempt runs. False when the job has
    moved on (done, cancelled, re-queued as a later attempt, gone) or the node is taken already (a join task
    delivered twice). Commits."""
    running = session.scalar(
        select(Job.id).where(Job.id == job_id, Job.status == RUNNING, Job.attempt == attempt).with_for_update()
    )
    if running is None:
        session.rollback()
        return False
    session.add(JobNode(job_id=job_id, attempt=attempt, node_rank=node_rank, worker=worker))
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        return False
    return True


def nodes(session: Session, job_id: str, attempt: int) -> list[JobNode]:
    """The nodes that joined the attempt so far, by node rank."""
    return list(
        session.scalars(
            select(JobNode).where(JobNode.job_id == job_id, JobNode.attempt == attempt).order_by(JobNode.node_rank)
        )
    )


def leave(session: Session, job_id: str, attempt: int, node_rank: int, error: str | None) -> None:
    """The node's agent has ended; `error`: why its part of the group failed (None: it did not)."""
    session.execute(
        update(JobNode)
        .where(JobNode.job_id == job_id, JobNode.attempt == attempt, JobNode.node_rank == node_rank)
        .values(left_at=utcnow(), error=error)
    )


def still_running(session: Session, job_id: str, attempt: int) -> bool:
    """Whether the job's attempt still runs (a joined node stops when it does not)."""
    return (
        session.scalar(select(Job.id).where(Job.id == job_id, Job.status == RUNNING, Job.attempt == attempt))
        is not None
    )
