"""What a training run records as it goes: its metrics, checkpoints, training dynamics, memory report and log
lines, each row under its job (`jobs.id`, app/db/tables.py, which imports this module)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class Metric(Base):
    """One value of one series at one step; a re-run step (after a resume) never duplicates it."""

    __tablename__ = "metrics"
    __table_args__ = (UniqueConstraint("job_id", "step", "name"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    step: Mapped[int]
    name: Mapped[str] = mapped_column(String(50))
    value: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class JobCheckpoint(Base):
    """A checkpoint directory in the artifact store, with its digest; paths never leave the server."""

    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("job_id", "step"),)

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int]
    storage_key: Mapped[str] = mapped_column(String(500))
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class JobDynamics(Base):
    """One record of a job's training dynamics at one step. kind "weights" (model/probes/dynamics.py): per weight matrix
    and layer, every training.dynamics_every updates; kind "attention" (model/probes/attention_stats.py): per layer and
    head, at every evaluation. `groups` lists [group, layer, head] triples and each list of `values` (one per
    statistic) has one number (or null) per group. A step re-run after a resume overwrites its record."""

    __tablename__ = "job_dynamics"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    step: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    groups: Mapped[list[Any]] = mapped_column(JSON)
    values: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class JobLog(Base):
    """One line a worker logged about a job (app/db/log_rows.py bounds them; worker/training/job_log.py writes them).

    `seq` numbers a job's lines from 1 in the order they were logged, over all its attempts: a client follows the
    log with `after=<seq>`. Only the newest lines are kept; the row just before them says how many were dropped."""

    __tablename__ = "job_logs"
    __table_args__ = (UniqueConstraint("job_id", "seq"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    seq: Mapped[int]
    attempt: Mapped[int | None] = mapped_column(nullable=True)  # None: logged outside a claimed attempt
    level: Mapped[str] = mapped_column(String(10))  # info | warning | error | critical
    logger: Mapped[str] = mapped_column(String(100))
    message: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class JobMemory(Base):
    """The memory of one training step of a job, measured once by the worker before its first step
    (model/train/memory_profile.py): `report` holds {"measured", "estimated", "differences"}, or {"error"} when the
    measurement failed (the job trains on either way)."""

    __tablename__ = "job_memory"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
