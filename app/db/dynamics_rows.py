"""Rows of per-component training dynamics: written idempotently, read back as one matrix per statistic."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.run_record_tables import JobDynamics


def record(session: Session, job_id: str, records: list[dict[str, Any]]) -> None:
    """Write records ({"kind", "step", "groups", and one list per statistic}: DynamicsRecord.to_json()); a (kind,
    step) written again is replaced, here as in the database."""
    records = list({(r["kind"], r["step"]): r for r in records}.values())
    for r in records:
        session.execute(
            delete(JobDynamics).where(
                JobDynamics.job_id == job_id, JobDynamics.kind == r["kind"], JobDynamics.step == r["step"]
            )
        )
    session.flush()
    for r in records:
        values = {k: v for k, v in r.items() if k not in ("kind", "step", "groups")}
        session.add(JobDynamics(job_id=job_id, kind=r["kind"], step=r["step"], groups=r["groups"], values=values))


def read(session: Session, job_id: str, kind: str) -> list[JobDynamics]:
    """Every record of one kind of the job, by step."""
    return list(
        session.scalars(
            select(JobDynamics).where(JobDynamics.job_id == job_id, JobDynamics.kind == kind).order_by(JobDynamics.step)
        )
    )
