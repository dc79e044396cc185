"""Webhook tables: the endpoints an owner registers, and one row per delivery of an event to an endpoint.

A delivery row is the truth about it (app/db/webhook_rows.py moves it; a Celery message only carries its id):
pending -> succeeded | retrying -> ... -> succeeded | failed. Imported by migrations/env.py beside app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, true
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class WebhookEndpoint(Base):
    """A URL that receives the owner's events of the types in `events`, signed with `secret` (Standard Webhooks).

    The secret is stored as it is (`whsec_` + base64): the worker must sign with it, and the service has no key to
    encrypt it with. After a rotation the previous secret signs too, beside the new one, until
    `previous_secret_expires_at`, so a receiver can switch without losing a delivery."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    url: Mapped[str] = mapped_column(String(2000))
    description: Mapped[str | None] = mapped_column(String(500), nullable=True)
    events: Mapped[list[str]] = mapped_column(JSON)  # event types, e.g. ["job.succeeded", "job.failed"]
    enabled: Mapped[bool] = mapped_column(default=True, server_default=true())
    secret: Mapped[str] = mapped_column(String(100))
    previous_secret: Mapped[str | None] = mapped_column(String(100), nullable=True)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(Base):
    """One event for one endpoint, and how sending it went.

    `message_id` is the `webhook-id` header: the same on every attempt (and for every endpoint the event went to), so
    a receiver drops a message it already handled. `payload` is the body exactly as signed and sent, every time.
    `locked_until` is set while a worker makes an attempt; `task_due_at` is when the last task message sent for the
    next attempt reaches a worker (None: none sent; the reaper sends one when it is due)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_endpoint_id_created_at", "endpoint_id", "created_at"),
        Index("ix_webhook_deliveries_status_next_attempt_at", "status", "next_attempt_at"),
    )

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    message_id: Mapped[str] = mapped_column(String(64))
    event_type: Mapped[str] = mapped_column(String(50))
    payload: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="pending")  # pending | retrying | succeeded | failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer)
    last_status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    task_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
