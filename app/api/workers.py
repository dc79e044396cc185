"""GET /v1/workers: the workers alive now, with the device each computes on and what an inference worker serves
(from their heartbeats)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from sqlalchemy import select

from app.api.deps import SessionDep, SettingsDep
from app.api.scopes import ReadKey
from app.core.scopes import Scope
from app.db.tables import TrainedModel, Worker
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


@router.get("", response_model=WorkerList)
def list_workers(session: SessionDep, settings: SettingsDep, key: ReadKey) -> WorkerList:
    """Workers whose heartbeat was seen in the last three periods: queues, device kind and name, memory, and what
    an inference worker serves (its warm models, what `backend: auto` means on it). A worker serves every
    organisation: of its warm models the caller sees its own organisation's, and how many others it holds
    (`other_models`); the references it could not load (operators' settings) only with the admin scope."""
    workers = [worker_public(w, serving=True) for w in live_workers(session, settings.worker_heartbeat_seconds)]
    held = {m.model_id for w in workers if w.serving for m in w.serving.warm_models}
    own = set(
        session.scalars(select(TrainedModel.id).where(TrainedModel.id.in_(held), TrainedModel.owner_id == key.owner_id))
    )
    for w in workers:
        if w.serving is not None:
            mine = [m for m in w.serving.warm_models if m.model_id in own]
            w.serving.other_models = len(w.serving.warm_models) - len(mine)
            w.serving.warm_models = mine
            if Scope.ADMIN not in key.scopes:
                w.serving.warm_failed = []
    return WorkerList(workers=workers)
