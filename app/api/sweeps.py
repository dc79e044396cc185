"""Hyperparameter sweeps: start one, list them, read one with its trials, cancel one. Trials are jobs: they are
listed, compared and cancelled as jobs too (GET /v1/jobs?sweep_id=)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Header, Query, Request, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import conflict, not_found
from app.api.jobs import dispatch
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import ReadKey, TrainAndModelsWriteKey, TrainKey
from app.db.job_rows import ACTIVE_STATES, request_cancel
from app.db.tables import Job, Sweep
from app.schemas.common import Page
from app.schemas.sweeps import SweepCreate, SweepPublic, SweepStatus
from app.services import sweep_runner, sweeps, webhooks
from app.services.sweep_journal import lock
from app.services.sweep_views import public

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/sweeps", tags=["sweeps"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Not found"}}


def owned_sweep(session: Session, sweep_id: str, owner_id: str) -> Sweep:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None or sweep.owner_id != owner_id:
        raise not_found("sweep", sweep_id)
    return sweep


@router.post(
    "",
    response_model=SweepPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        400: {"description": "Body is not UTF-8 JSON"},
        409: {"description": "Idempotency-Key reused with another body"},
        422: {"description": "Invalid sweep: a setting the job schema lacks, a value it refuses, ..."},
    },
)
def create_sweep(
    body: SweepCreate,
    session: SessionDep,
    settings: SettingsDep,
    key: TrainAndModelsWriteKey,
    response: Response,
    background: BackgroundTasks,
    request: Request,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> SweepPublic:
    """Start a sweep: its first trials (up to max_concurrent_trials) are queued as jobs at once; each that ends
    starts the next while the budget lasts; the best trial's model is then registered as `name@best`, which is why
    the key needs `models:write` beside `train`. It registers as this key, checked again then: a key revoked or
    expired by then, or its member's role lowered, leaves the model unregistered and the sweep's `error` saying why."""
    audit.record(session, key, request, "sweep.created", "sweep", Sweep, {"name": body.name})  # if it is new
    sweep, created = sweeps.create(session, settings, key, body, idempotency_key)
    if created:
        started = sweep_runner.advance(session, settings, sweep.id)
        for job_id in started:
            background.add_task(dispatch, job_id)  # after the commit, and after the response is sent
    else:
        response.headers["Idempotent-Replayed"] = "true"
    session.refresh(sweep)
    return public(session, sweep)


@router.get("", response_model=Page[SweepPublic])
def list_sweeps(
    session: SessionDep,
    key: ReadKey,
    status_filter: Annotated[SweepStatus | None, Query(alias="status")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[SweepPublic]:
    query = select(Sweep).where(Sweep.owner_id == key.owner_id)
    if status_filter:
        query = query.where(Sweep.status == status_filter)
    return paginate(
        session, query, (Sweep.created_at.desc(), Sweep.id), limit, offset, lambda s: public(session, s, detail=False)
    )


@router.get("/{sweep_id}", response_model=SweepPublic, responses=NOT_FOUND)
def read_sweep(sweep_id: str, session: SessionDep, key: ReadKey) -> SweepPublic:
    return public(session, owned_sweep(session, sweep_id, key.owner_id))


@router.post(
    "/{sweep_id}/cancel",
    response_model=SweepPublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**NOT_FOUND, 409: {"description": "Sweep already finished"}},
)
def cancel_sweep(
    sweep_id: str, session: SessionDep, settings: SettingsDep, key: TrainKey, request: Request
) -> SweepPublic:
    """No further trial starts; queued trials are cancelled at once, running ones at their next lease renewal.
    The sweep is `cancelled` once none runs; its best trial so far is shown but not registered."""
    owned_sweep(session, sweep_id, key.owner_id)
    sweep = lock(session, sweep_id)
    assert sweep is not None  # owned, just read
    if sweep.status != sweep_runner.RUNNING:
        session.rollback()
        raise conflict(f"sweep {sweep_id} is already {sweep.status}")
    sweep.cancel_requested = True
    audit.record(session, key, request, "sweep.cancelled", "sweep", sweep_id, {"name": sweep.name})
    session.commit()
    for job in session.scalars(select(Job).where(Job.sweep_id == sweep_id, Job.status.in_(ACTIVE_STATES))).all():
        if request_cancel(session, job):  # queued: cancelled now (a running one by its worker, which reports it)
            webhooks.emit_job(session, job, job.status)
            session.commit()
    sweep_runner.advance(session, settings, sweep_id)
    session.refresh(sweep)
    return public(session, sweep)
