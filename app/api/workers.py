"""GET /v1/workers: the workers alive now, with the device each computes on (from their heartbeats)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import SessionDep, SettingsDep
from app.api.scopes import requires
from app.core.scopes import Scope
from app.db.tables import Worker
from app.db.worker_rows import live_workers
from app.schemas.service import WorkerList, WorkerPublic

router = APIRouter(prefix="/v1/workers", tags=["workers"])


def worker_public(w: Worker) -> WorkerPublic:
    return WorkerPublic(
        hostname=w.hostname,
        queues=w.queues.split(","),
        last_seen_at=w.last_seen_at,
        draining=w.draining,
        device_kind="cuda" if w.device_kind == "cuda" else "cpu" if w.device_kind == "cpu" else None,
        device_name=w.device_name,
        device_memory_total=w.device_memory_total,
        device_memory_free=w.device_memory_free,
    )


@router.get("", response_model=WorkerList, dependencies=[requires(Scope.READ)])
def list_workers(session: SessionDep, settings: SettingsDep) -> WorkerList:
    """Workers whose heartbeat was seen in the last three periods: queues, device kind and name, memory."""
    return WorkerList(workers=[worker_public(w) for w in live_workers(session, settings.worker_heartbeat_seconds)])
