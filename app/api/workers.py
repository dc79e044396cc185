"""GET /v1/workers: the workers alive now, with the device each computes on and what an inference worker serves
(from their heartbeats)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError

from app.api.deps import SessionDep, SettingsDep
from app.api.scopes import requires
from app.core.scopes import Scope
from app.db.tables import Worker
from app.db.worker_rows import live_workers
from app.schemas.service import WorkerList, WorkerPublic, WorkerServing

router = APIRouter(prefix="/v1/workers", tags=["workers"])


def worker_public(w: Worker, serving: bool = False) -> WorkerPublic:
    """The worker as the API shows it; `serving` (the models it holds, by id) only to callers with a key."""
    return WorkerPublic(
        hostname=w.hostname,
        queues=w.queues.split(","),
        last_seen_at=w.last_seen_at,
        draining=w.draining,
        device_kind="cuda" if w.device_kind == "cuda" else "cpu" if w.device_kind == "cpu" else None,
        device_name=w.device_name,
        device_memory_total=w.device_memory_total,
        device_memory_free=w.device_memory_free,
        serving=_serving(w.serving) if serving else None,
    )


def _serving(stored: dict[str, Any] | None) -> WorkerServing | None:
    """The heartbeat's record, or None where it is missing or written by a worker of another version."""
    if stored is None:
        return None
    try:
        return WorkerServing.model_validate(stored)
    except ValidationError:
        return None


@router.get("", response_model=WorkerList, dependencies=[requires(Scope.READ)])
def list_workers(session: SessionDep, settings: SettingsDep) -> WorkerList:
    """Workers whose heartbeat was seen in the last three periods: queues, device kind and name, memory, and what
    an inference worker serves (its warm models, what `backend: auto` means on it)."""
    return WorkerList(
        workers=[worker_public(w, serving=True) for w in live_workers(session, settings.worker_heartbeat_seconds)]
    )
