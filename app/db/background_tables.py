"""Background work on a model that the inference worker carries out: evaluations and file translations (dataset
translations are in app/db/dataset_translation_tables.py). All three move through the states of app/db/task_rows.py.
Imported by migrations/env.py beside app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class Evaluation(Base):
    """A model scored on a parallel dataset by the inference worker: BLEU, chrF and chrF++ with their sacrebleu
    signatures, and the hypotheses (a text file in the artifact store, one line per source line).

    queued -> running -> succeeded | failed; a redelivered task finds it running or over and only resumes or
    skips it. Deleted with its model (the store's files by the model's deletion too)."""

    __tablename__ = "evaluations"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    # SET NULL: the dataset may be deleted afterwards; the scores stay.
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), index=True)
    job_id: Mapped[str | None] = mapped_column(String(36), nullable=True)  # the job that asked for it, if one did
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)  # beam_size, alpha, tokenize, max_sentences, backend
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    sentences: Mapped[int] = mapped_column(default=0)
    translated: Mapped[int] = mapped_column(default=0)  # progress
    scores: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # {"bleu": {score, signature}, ...}
    hypotheses_key: Mapped[str | None] = mapped_column(String(500), nullable=True)
    # The backend that translated it ("pytorch", "ctranslate2"), set when it succeeds: scores compare within one.
    backend: Mapped[str | None] = mapped_column(String(20), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # sends of its task (worker/reaper.py)
    # a model of several pairs: the language asked for (its token before each source), and whether it never trained
    # on the pair (None: the source language not known); None for a model of one pair (migration 0039)
    target_language: Mapped[str | None] = mapped_column(String(20), nullable=True)
    zero_shot: Mapped[bool | None] = mapped_column(nullable=True)


class FileTranslation(Base):
    """A text file translated by a model in the background: the source and the result live in the artifact store.

    queued -> running -> succeeded | failed, as an Evaluation (app/db/task_rows.py moves both)."""

    __tablename__ = "file_translations"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    filename: Mapped[str] = mapped_column(String(255))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)  # beam_size, language (of the splitter), backend asked
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    lines: Mapped[int] = mapped_column(default=0)
    sentences: Mapped[int] = mapped_column(default=0)
    translated: Mapped[int] = mapped_column(default=0)  # sentences so far
    source_key: Mapped[str] = mapped_column(String(500))
    result_key: Mapped[str | None] = mapped_column(String(500), nullable=True)
    backend: Mapped[str | None] = mapped_column(String(20), nullable=True)  # the one that translated it, once done
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # sends of its task (worker/reaper.py)
    # a model of several pairs: the language asked for (its token before each source), and whether it never trained
    # on the pair (None: the source language not known); None for a model of one pair (migration 0039)
    target_language: Mapped[str | None] = mapped_column(String(20), nullable=True)
    zero_shot: Mapped[bool | None] = mapped_column(nullable=True)
