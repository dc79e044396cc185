"""Dataset translations: a dataset's text translated by a model into a new parallel dataset, in the background.

queued -> running -> succeeded | failed, as an Evaluation (app/db/task_rows.py moves all three). The worker writes the
translations a part at a time to the artifact store (worker/data/translated_parts.py): a redelivered task resumes
after the last part written, so no row is lost or translated twice. The new dataset's id is chosen here, its row
made by the worker at the end. Deleted with its model, its dataset or its owner. Imported by migrations/env.py beside
app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class DatasetTranslation(Base):
    __tablename__ = "dataset_translations"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    output_dataset_id: Mapped[str] = mapped_column(String(36), default=new_id)  # its row exists once succeeded
    # side, decoding, synthetic_side, tag, name, backend asked, max_sentences; the row counts once succeeded
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    sentences: Mapped[int] = mapped_column(default=0)
    translated: Mapped[int] = mapped_column(default=0)  # rows done so far, across attempts
    resumed_from: Mapped[int] = mapped_column(default=0)  # rows done when the running attempt started
    backend: Mapped[str | None] = mapped_column(String(20), nullable=True)  # the one that translated, once done
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # sends of its task (worker/reaper.py)
    # a model of several pairs: the language asked for (its token before each source), and whether it never trained
    # on the pair (None: the source language not known); None for a model of one pair (migration 0039)
    target_language: Mapped[str | None] = mapped_column(String(20), nullable=True)
    zero_shot: Mapped[bool | None] = mapped_column(nullable=True)
