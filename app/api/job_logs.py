"""A training job's log: what its worker said about it, read in pages that a client follows with `after`."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import APIRouter, Query

from app.api.deps import SessionDep
from app.api.jobs import owned_job
from app.api.scopes import JobKey
from app.db import log_rows
from app.schemas.job_logs import JobLogLine, JobLogPublic, LogLevel
from app.schemas.jobs import JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("/{job_id}/logs", response_model=JobLogPublic, responses={404: {"description": "Not found"}})
def read_job_logs(
    job_id: str,
    session: SessionDep,
    key: JobKey,
    after: Annotated[int, Query(ge=0, le=2**31 - 1, description="only lines with a greater seq")] = 0,
    limit: Annotated[int, Query(ge=1, le=log_rows.MAX_LINES)] = 500,
    level: Annotated[LogLevel, Query(description="the lowest level shown")] = "info",
) -> JobLogPublic:
    """The job's log lines after `after`, oldest first. A job keeps its newest 1999 lines of at most 8000
    characters each; a line before them says how many earlier ones were dropped."""
    job = owned_job(session, job_id, key)
    status = cast(JobStatus, job.status)  # read before the lines: a final status means every line is there
    rows, has_more = log_rows.page(session, job_id, after, limit, log_rows.at_or_above(level))
    lines = [JobLogLine.model_validate(row) for row in rows]
    return JobLogPublic(
        job_id=job_id, status=status, lines=lines, next_after=lines[-1].seq if lines else after, has_more=has_more
    )
