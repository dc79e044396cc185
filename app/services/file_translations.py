"""Translating a file: where its source and result live in the artifact store, and sending its task.

POST /v1/models/{id}/translations stores the upload and a queued row, then an inference worker translates it
(worker/tasks/file_translation.py).
"""

from __future__ import annotations

from celery import Celery

from app.core.task_names import TRANSLATE_FILE
from app.db.background_tables import FileTranslation
from app.services.queueing import dispatch_background


def translations_prefix(model_id: str) -> str:
    return f"translations/{model_id}"


def source_key(model_id: str, translation_id: str) -> str:
    return f"{translations_prefix(model_id)}/{translation_id}/source.txt"


def result_key(model_id: str, translation_id: str) -> str:
    return f"{translations_prefix(model_id)}/{translation_id}/result.txt"


def dispatch(translation_id: str, celery: Celery | None = None) -> None:
    dispatch_background(TRANSLATE_FILE, FileTranslation, translation_id, celery)
