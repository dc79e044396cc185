"""Corrections: what a person changed in a model's translation, kept with the model they were made to.

Each row is one POST /v1/models/{id}/corrections: the source, the translation the model gave, the corrected text,
and the key that sent it. An adaptation (app/services/corrections.py) gathers the corrections of a model and of the
models it descends from into a dataset, and fine-tunes the model on them. A correction goes with its model.
Imported by migrations/env.py beside app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class Correction(Base):
    __tablename__ = "corrections"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    key_id: Mapped[str] = mapped_column(String(36))  # the key that sent it
    key_prefix: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(Text)
    translation: Mapped[str] = mapped_column(Text)  # as the model gave it ("" when not known)
    corrected: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
