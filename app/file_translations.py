"""Translating a file: where its source and result live in the artifact store, and sending its task.

POST /v1/models/{id}/translations stores the upload and a queued row, then an inference worker translates it
(worker/tasks/file_translation.py).
"""

from __future__ import annotations

from celery import Celery

from app.db import task_rows
from app.db.models import FileTranslation
from app.db.session import session_scope
from app.queueing import get_sender
from app.task_names import INFERENCE_QUEUE, TRANSLATE_FILE


def translations_prefix(model_id: str) -> str:
    return f"translations/{model_id}"


def source_key(model_id: str, translation_id: str) -> str:
    return f"{translations_prefix(model_id)}/{translation_id}/source.txt"


def result_key(model_id: str, translation_id: str) -> str:
    return f"{translations_prefix(model_id)}/{translation_id}/result.txt"


def dispatch(translation_id: str, celery: Celery | None = None) -> None:
    """Send the translation's task; when the broker is away the translation fails saying so (and raises)."""
    try:
        (celery or get_sender()).send_task(TRANSLATE_FILE, args=[translation_id], queue=INFERENCE_QUEUE)
    except Exception as exc:
        with session_scope() as session:
            task_rows.fail(
                session, FileTranslation, translation_id, f"the broker is unavailable ({type(exc).__name__}); ask again"
            )
        raise
