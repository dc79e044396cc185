"""The model registry: the names an organisation registers models under (versions only grow), `name@alias`
pointers and the record of every alias move (app/services/registry.py). app/db/tables.py imports this module:
a model row lists its aliases."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, utcnow


class ModelName(Base):
    """A name an owner has registered models under, with the last version it gave: versions only ever grow."""

    __tablename__ = "model_names"

    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_version: Mapped[int] = mapped_column(default=0)


class ModelAlias(Base):
    """`name@alias` points at one version of the name; deleting that model removes the alias."""

    __tablename__ = "model_aliases"

    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    alias: Mapped[str] = mapped_column(String(64), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ModelAliasEvent(Base):
    """One move of an alias: from which model (None: it was new) to which (None: removed), by which key, when.
    Ids and versions are plain values, so the record outlives the models and keys it names."""

    __tablename__ = "model_alias_events"
    __table_args__ = (Index("ix_model_alias_events_owner_id_name_alias", "owner_id", "name", "alias"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    alias: Mapped[str] = mapped_column(String(64))
    from_model_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    from_version: Mapped[int | None] = mapped_column(nullable=True)
    to_model_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    to_version: Mapped[int | None] = mapped_column(nullable=True)
    key_id: Mapped[str] = mapped_column(String(36))  # the API key that moved it (its owner is owner_id)
    key_prefix: Mapped[str] = mapped_column(String(16))  # as humans tell keys apart
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
