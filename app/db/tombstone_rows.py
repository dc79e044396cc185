"""Tombstones of deleted rows' artifacts, and the checks the collector makes before deleting a prefix.

Invariant: a tombstone is written in the transaction that deletes its rows, so a rolled-back deletion leaves none,
and the files of a committed one are always found. The collector deletes a prefix only when the grace period has
passed and no row refers to it any more (a stored key under it, a live row with its id, a queued or running job
that starts from the model): a worker still writing (a job cancelled while saving a checkpoint, an export being
built) is long finished by then, and a deletion that a later row contradicts is skipped, never forced.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, exists, or_, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.job_rows import ACTIVE_STATES
from app.db.tables import ArtifactTombstone, Dataset, Job, TrainedModel


def bury(session: Session, owner_id: str, kind: str, object_id: str, prefixes: list[str]) -> None:
    """Record the prefixes of a row being deleted; the caller commits with the deletion."""
    now = utcnow()
    for prefix in prefixes:
        session.add(ArtifactTombstone(owner_id=owner_id, kind=kind, object_id=object_id, prefix=prefix, deleted_at=now))


def due(session: Session, before: datetime, limit: int = 500) -> list[int]:
    """Ids of tombstones older than `before`, oldest first."""
    query = (
        select(ArtifactTombstone.id)
        .where(ArtifactTombstone.deleted_at < before)
        .order_by(ArtifactTombstone.deleted_at, ArtifactTombstone.id)
        .limit(limit)
    )
    return list(session.scalars(query))


def still_referenced(session: Session, tombstone: ArtifactTombstone) -> str | None:
    """Why the tombstone's prefix must not be deleted yet (a row refers to it), or None."""
    under = tombstone.prefix.rstrip("/") + "/"
    key_rows = or_(
        TrainedModel.storage_key == tombstone.prefix, TrainedModel.storage_key.startswith(under, autoescape=True)
    )
    if session.scalar(select(exists().where(key_rows))):
        return "a model's files are stored under it"
    data_rows = or_(Dataset.storage_key == tombstone.prefix, Dataset.storage_key.startswith(under, autoescape=True))
    if session.scalar(select(exists().where(data_rows))):
        return "a dataset's file is stored under it"
    live = {"job": Job, "model": TrainedModel, "dataset": Dataset}.get(tombstone.kind)
    if live is not None and session.get(live, tombstone.object_id) is not None:
        return f"{tombstone.kind} {tombstone.object_id} exists"
    if tombstone.kind == "model":
        starting = select(exists().where(Job.init_model_id == tombstone.object_id, Job.status.in_(ACTIVE_STATES)))
        if session.scalar(starting):
            return f"an active job starts from model {tombstone.object_id}"
    return None


def remove(session: Session, tombstone_id: int) -> None:
    session.execute(delete(ArtifactTombstone).where(ArtifactTombstone.id == tombstone_id))
