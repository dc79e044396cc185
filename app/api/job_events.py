"""GET /v1/jobs/{id}/events: Server-Sent Events of a job's progress and new metric points, until it ends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from sqlalchemy import select

from app.api.deps import SessionDep
from app.api.jobs import NOT_FOUND, owned_job, progress_of
from app.api.scopes import JobKey
from app.db.job_rows import TERMINAL_STATES
from app.db.run_record_tables import Metric
from app.db.session import get_sessionmaker
from app.db.tables import Job, TrainedModel

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def _snapshot(job_id: str, after_metric_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    session = get_sessionmaker()()
    try:
        job = session.get(Job, job_id)
        assert job is not None  # _owned found it when the stream opened
        rows = session.execute(
            select(Metric.id, Metric.step, Metric.name, Metric.value)
            .where(Metric.job_id == job_id, Metric.id > after_metric_id)
            .order_by(Metric.id)
            .limit(5000)
        ).all()
        state = {
            "status": job.status,
            "attempt": job.attempt,
            "error": job.error,
            "progress": progress_of(job).model_dump(),
            "model_id": session.scalar(select(TrainedModel.id).where(TrainedModel.job_id == job_id)),
        }
        return state, [{"id": r.id, "step": r.step, "name": r.name, "value": r.value} for r in rows]
    finally:
        session.close()


@router.get(
    "/{job_id}/events",
    responses={**NOT_FOUND, 200: {"content": {"text/event-stream": {}}}},
    response_class=StreamingResponse,
)
def job_events(
    job_id: str,
    request: Request,
    session: SessionDep,
    key: JobKey,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """Server-Sent Events: `progress` when the job changes, `metric` for each new point, `end` when it is over."""
    owned_job(session, job_id, key)
    start_after = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0

    async def stream() -> AsyncIterator[str]:
        after, previous, idle = start_after, None, 0.0
        yield "retry: 2000\n\n"
        while not await request.is_disconnected():
            state, points = await run_in_threadpool(_snapshot, job_id, after)
            for point in points:
                after = point.pop("id")
                yield f"id: {after}\nevent: metric\ndata: {json.dumps(point)}\n\n"
            if state != previous:
                previous, idle = state, 0.0
                yield f"event: progress\ndata: {json.dumps(state)}\n\n"
            if state["status"] in TERMINAL_STATES and not points:
                yield f"event: end\ndata: {json.dumps({'status': state['status']})}\n\n"
                return
            await asyncio.sleep(1.0)
            idle += 1.0
            if idle >= 15:
                idle = 0.0
                yield ": keep-alive\n\n"

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
