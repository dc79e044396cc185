"""GET /v1/jobs/compare: several of the caller's jobs side by side, their settings and metric series.

Included before app/api/jobs.py's router, whose /v1/jobs/{job_id} would otherwise take "compare" for an id."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import APIRouter, Query
from sqlalchemy.orm import Session

from app.api.deps import SessionDep
from app.api.errors import bad_query
from app.api.jobs import NOT_FOUND, owned_job
from app.api.scopes import JobKey
from app.db import metric_rows
from app.db.tables import Job
from app.schemas.jobs import ComparedJob, ComparedSeries, JobComparison, JobStatus, Objective
from app.services import job_comparison

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def compared_job(session: Session, job: Job, max_points: int) -> ComparedJob:
    """A job as GET /v1/jobs/compare shows it: its flattened settings and every metric series, averaged into at
    most max_points buckets (best and final values from the whole series)."""
    series = metric_rows.series(session, job.id, None, 0)
    # Read after the series, so it holds every step they hold (a running job writes points between the two).
    recorded = metric_rows.recorded_at(session, job.id) if job.started_at is not None else {}
    metrics = {}
    for name, (steps, values) in series.items():
        kept_steps, kept_values = metric_rows.downsample(steps, values, max_points)
        start, seconds = job.started_at, None
        if start is not None:
            seconds = [round((recorded[name][step] - start).total_seconds(), 3) for step in kept_steps]
        metrics[name] = ComparedSeries(
            steps=kept_steps,
            values=kept_values,
            seconds=seconds,
            total_points=len(steps),
            **job_comparison.best_and_final(name, steps, values),
        )
    return ComparedJob(
        id=job.id,
        name=job.name,
        tags=job.tags,
        status=cast(JobStatus, job.status),
        objective=cast(Objective, job.objective),
        settings=job_comparison.flatten({"model": job.model_config, "training": job.training_config}),
        metrics=metrics,
    )


@router.get(
    "/compare",
    response_model=JobComparison,
    responses={**NOT_FOUND, 422: {"description": "Fewer than 2 or more than 10 ids, or one given twice"}},
)
def compare_jobs(
    session: SessionDep,
    key: JobKey,
    ids: Annotated[str, Query(description="2 to 10 comma-separated ids of the caller's jobs")],
    max_points: Annotated[
        int, Query(ge=2, le=20000, description="each series averaged into at most this many buckets")
    ] = 2000,
) -> JobComparison:
    try:
        job_ids = job_comparison.parse_ids(ids)
    except ValueError as exc:
        raise bad_query("ids", str(exc)) from exc
    owned = [owned_job(session, job_id, key) for job_id in job_ids]  # every 404 before reading any series
    jobs = [compared_job(session, job, max_points) for job in owned]
    return JobComparison(jobs=jobs, differing=job_comparison.differing([job.settings for job in jobs]))
