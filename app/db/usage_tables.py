"""The worker time of deleted jobs, kept so that deleting a job never gives its minutes back.

The daily worker-minutes quota (app/services/quotas.py) sums the runs of the organisation's jobs; a job's row goes
when the job is deleted (app/services/deletion.py), so its run is copied here in the same transaction first.
Imported by migrations/env.py beside app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import access_tables  # noqa: F401  (owners, which owner_id refers to)
from app.db.base import Base, UTCDateTime, utcnow


class DeletedJobUsage(Base):
    """One deleted job's run: from its first claim to its end, on `processes` devices (devices x nodes)."""

    __tablename__ = "deleted_job_usage"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[str] = mapped_column(String(36))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    processes: Mapped[int] = mapped_column(Integer)
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
