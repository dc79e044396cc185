"""Rows of per-component training dynamics: written idempotently, read back as one matrix per statistic."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.models import JobDynamics


def record(session: Session, job_id: str, records: list[dict[str, Any]]) -> None:
    """Write records ({"step", "groups", and one list per statistic}); a step written again is replaced."""
    if not records:
        return
    steps = [r["step"] for r in records]
    session.execute(delete(JobDynamics).where(JobDynamics.job_id == job_id, JobDynamics.step.in_(steps)))
    for r in records:
        values = {k: v for k, v in r.items() if k not in ("step", "groups")}
        session.add(JobDynamics(job_id=job_id, step=r["step"], groups=r["groups"], values=values))


def read(session: Session, job_id: str) -> list[JobDynamics]:
    """Every record of the job, by step."""
    return list(session.scalars(select(JobDynamics).where(JobDynamics.job_id == job_id).order_by(JobDynamics.step)))
