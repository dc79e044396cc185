"""A job's measured step memory (one row per job): written once by the worker, read by the API."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.run_record_tables import JobMemory


def record(session: Session, job_id: str, report: dict[str, Any]) -> None:
    """Store the report; a job measured again (another attempt) keeps the newest."""
    row = session.get(JobMemory, job_id)
    if row is None:
        session.add(JobMemory(job_id=job_id, report=report))
    else:
        row.report = report


def read(session: Session, job_id: str) -> dict[str, Any] | None:
    return session.scalar(select(JobMemory.report).where(JobMemory.job_id == job_id))


def measured(session: Session, job_id: str) -> bool:
    """Whether the job has a report that is not an error (an error is measured again on the next attempt)."""
    report = read(session, job_id)
    return report is not None and "error" not in report
