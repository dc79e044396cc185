"""GET /healthz: the database, the broker, and the workers seen through their heartbeats."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response, status
from sqlalchemy import text

from app.api.deps import SessionDep, SettingsDep
from app.api.workers import worker_public
from app.db.worker_rows import live_workers
from app.schemas.service import ComponentHealth, Health, WorkerPublic
from app.services.queueing import get_sender

router = APIRouter(tags=["health"])


def _check_broker(timeout: float) -> ComponentHealth:
    try:
        with get_sender().connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
            return ComponentHealth(ok=True, detail=connection.as_uri())
    except Exception as exc:  # any failure to reach the broker is reported, not raised
        return ComponentHealth(ok=False, detail=f"{type(exc).__name__}: {exc}"[:300])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
def healthz(session: SessionDep, settings: SettingsDep, response: Response) -> Health:
    workers: list[WorkerPublic] = []
    try:
        session.execute(text("SELECT 1"))
        database = ComponentHealth(ok=True, detail=session.get_bind().dialect.name)
        workers = [worker_public(w) for w in live_workers(session, settings.worker_heartbeat_seconds)]
    except Exception as exc:
        database = ComponentHealth(ok=False, detail=f"{type(exc).__name__}: {exc}"[:300])
    broker = _check_broker(settings.health_timeout_seconds)
    state: Literal["ok", "degraded", "unavailable"]
    if not database.ok:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        state = "unavailable"
    elif not broker.ok or not workers:
        state = "degraded"
    else:
        state = "ok"
    return Health(status=state, database=database, broker=broker, workers=workers)
