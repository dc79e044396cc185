"""Reads of the `workers` table (written by each worker's heartbeat, worker/heartbeat.py)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.tables import Worker

TRAINING_QUEUE_PREFIX = "training"


def live_workers(session: Session, heartbeat_seconds: int) -> list[Worker]:
    """Workers whose heartbeat was seen in the last three periods, by hostname."""
    horizon = utcnow() - timedelta(seconds=3 * heartbeat_seconds)
    return list(session.scalars(select(Worker).where(Worker.last_seen_at >= horizon).order_by(Worker.hostname)))


def trains(worker: Worker) -> bool:
    return any(q.split(".")[0] == TRAINING_QUEUE_PREFIX for q in worker.queues.split(","))


def largest_gpu_memory(session: Session) -> int | None:
    """Bytes of the largest GPU a training worker has ever reported, or None if no GPU worker ever registered."""
    rows = session.scalars(select(Worker).where(Worker.device_kind == "cuda")).all()
    sizes = [w.device_memory_total for w in rows if trains(w) and w.device_memory_total]
    if sizes:
        return max(sizes)
    return 0 if any(trains(w) for w in rows) else None  # 0: a GPU worker whose memory is unknown
