"""Glossaries: an organisation's terminology for one language pair, which translations are to follow.

`entries` is the list of [source, target] terms as checked by app/services/glossaries.py: no empty term, none
longer than MAX_TERM_CHARS, no source (by the glossary's case rule) with two targets. Imported by migrations/env.py
beside app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, String, false
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class Glossary(Base):
    __tablename__ = "glossaries"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    source_language: Mapped[str] = mapped_column(String(20))
    target_language: Mapped[str] = mapped_column(String(20))
    case_sensitive: Mapped[bool] = mapped_column(default=False, server_default=false())
    entries: Mapped[list[list[str]]] = mapped_column(JSON)  # [[source, target], ...]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
