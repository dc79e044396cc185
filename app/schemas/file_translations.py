"""Schemas of file translations: a text file translated by a model in the background."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from app.schemas.common import Output
from app.schemas.inference import AnsweringBackend

FileTranslationStatus = Literal["queued", "running", "succeeded", "failed"]


class FileTranslationPublic(Output):
    id: str
    model_id: str
    filename: str
    status: FileTranslationStatus
    error: str | None
    settings: dict[str, Any]
    lines: int
    sentences: int  # what is translated: the file's sentences (a line may hold several)
    translated: int
    attempt: int = Field(1, description="sends of its task (over 1: sent again after its worker died)")
    progress: float
    result_url: str | None  # once succeeded
    backend: AnsweringBackend | None = None  # which translated the file, once succeeded (asked for: settings.backend)
    target_language: str | None = Field(
        None, description="a model of several pairs: the language translated into (its token before each sentence)"
    )
    zero_shot: bool | None = Field(
        None, description="a model of several pairs: true when it never trained on the pair; null when unknown"
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
