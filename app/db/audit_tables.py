"""The audit trail: one row per change of state made through the API, kept with its organisation.

A row says who (the key's id, name and prefix, and its member, copied: a revoked key or a renamed member keeps its
history), when, what (an action such as `alias.moved`, the kind and id of the object, a small JSON of details) and
from where (the request id and the client's address). It is written in the transaction of the change it records
(app/db/audit_rows.py), so a change rolled back leaves no row. Imported by migrations/env.py beside app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class AuditEvent(Base):
    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_owner_id_created_at", "owner_id", "created_at"),
        Index("ix_audit_events_owner_id_object_id", "owner_id", "object_id"),
    )

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    action: Mapped[str] = mapped_column(String(60))  # e.g. "job.submitted", "alias.moved"
    object_kind: Mapped[str] = mapped_column(String(30))  # e.g. "job", "model", "alias"
    object_id: Mapped[str] = mapped_column(String(300))  # an id, or a name for what has none ("name@alias")
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # No foreign keys: the trail outlives what it speaks of (a key revoked, a model deleted).
    key_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    key_name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    key_prefix: Mapped[str | None] = mapped_column(String(20), nullable=True)
    member_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    member_name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    client: Mapped[str | None] = mapped_column(String(100), nullable=True)  # the client's address
