"""Who acts: organisations (the `owners` table), their members, and the members' API keys.

Every other table's `owner_id` refers to `owners`: app/db/tables.py imports this module so that they resolve, and
migrations/env.py imports it beside app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class Owner(Base):
    """An organisation: every dataset, job and model belongs to one. Its people are members, whose keys act for it;
    the table and the `owner_id` columns keep their first name (docs/security.md)."""

    __tablename__ = "owners"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The organisation's own quotas (None: the service's QUOTA_* setting; 0: unlimited), app/services/quotas.py.
    quota_storage_gb: Mapped[float | None] = mapped_column(Float, nullable=True)
    quota_active_jobs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    quota_worker_minutes_per_day: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The object-store prefixes its datasets may be registered from, within DATASET_URI_PREFIXES, set by its admins
    # (PUT /v1/organisation/dataset-uri-prefixes); None: all of DATASET_URI_PREFIXES (app/services/dataset_uris.py).
    dataset_uri_prefixes: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)

    keys: Mapped[list[ApiKey]] = relationship(back_populates="owner")
    members: Mapped[list[Member]] = relationship(back_populates="owner")


class Member(Base):
    """A person or robot of an organisation; its role (app/core/scopes.py) caps the scopes of its keys."""

    __tablename__ = "members"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    role: Mapped[str] = mapped_column(String(20))  # viewer | member | admin
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    owner: Mapped[Owner] = relationship(back_populates="members")


class ApiKey(Base):
    """An API key, stored as its SHA-256 only (keys are 256-bit random, so a fast hash is enough). It acts for its
    member's organisation with its scopes, as far as the member's role allows, until it expires or is revoked."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16))  # shown to humans to tell keys apart
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    member_id: Mapped[str] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"), index=True)
    scopes: Mapped[list[str]] = mapped_column(JSON)  # app/core/scopes.py Scope values
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Its own requests per minute (PATCH /v1/keys/{id}, admins); None: the service's RATE_LIMIT_PER_MINUTE.
    rate_limit_per_minute: Mapped[int | None] = mapped_column(Integer, nullable=True)

    owner: Mapped[Owner] = relationship(back_populates="keys")
    member: Mapped[Member] = relationship()
