"""A job's memory of one training step: measured by the worker before its first step, next to the estimate."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import SessionDep
from app.api.jobs import NOT_FOUND, owned_job
from app.api.scopes import JobKey
from app.db import memory_rows
from app.schemas.memory import JobMemoryPublic

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("/{job_id}/memory", response_model=JobMemoryPublic, responses=NOT_FOUND)
def read_memory(job_id: str, session: SessionDep, key: JobKey) -> JobMemoryPublic:
    """Peak memory of one update on the job's first batch by kind (weights, gradients, Adam moments, saved
    activations by component, temporary buffers), model/probes/anatomy.py's estimate for the job's settings (as
    POST /v1/estimate gives it) and for the measured batch, and where they differ. A job the worker has not measured
    yet: 200 with `measured` null."""
    owned_job(session, job_id, key)
    report = memory_rows.read(session, job_id) or {}
    if "measured" in report and "estimated_for_batch" not in report:  # stored when `estimated` was the batch's
        report = {**report, "estimated": None, "estimated_for_batch": report.get("estimated")}
    return JobMemoryPublic(
        job_id=job_id,
        measured=report.get("measured"),
        estimated=report.get("estimated"),
        estimated_for_batch=report.get("estimated_for_batch"),
        differences=report.get("differences", []),
        error=report.get("error"),
    )
