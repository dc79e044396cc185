"""Tables. Schema changes go through Alembic (migrations/); tests check the two agree."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class Owner(Base):
    """Whoever owns objects: every dataset, job and model belongs to one owner."""

    __tablename__ = "owners"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    keys: Mapped[list["ApiKey"]] = relationship(back_populates="owner")


class ApiKey(Base):
    """An API key, stored as its SHA-256 only (keys are 256-bit random, so a fast hash is enough)."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16))  # shown to humans to tell keys apart
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    owner: Mapped[Owner] = relationship(back_populates="keys")


class Ping(Base):
    """A round trip API -> broker -> worker; the worker stamps `answered_at` and its name."""

    __tablename__ = "pings"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    queue: Mapped[str] = mapped_column(String(50))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)


class Worker(Base):
    """A Celery worker process as last seen by its heartbeat; health reports recent ones."""

    __tablename__ = "workers"

    hostname: Mapped[str] = mapped_column(String(255), primary_key=True)
    queues: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int]
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
