"""Translate a dataset into a new parallel dataset (a DatasetTranslation row): worker/data/translating.py does the
work, resuming after the parts a dead worker left; any failure fails the row with its reason, never leaving it
running."""

from __future__ import annotations

import logging

from celery import shared_task

from app.artifacts import ArtifactStoreError
from app.core.task_names import TRANSLATE_DATASET
from app.db import task_rows
from app.db.dataset_translation_tables import DatasetTranslation
from app.db.session import session_scope
from model.data.corpus import DataError
from worker.data import translating
from worker.serving.errors import RequestError

log = logging.getLogger(__name__)


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=TRANSLATE_DATASET, acks_late=True, reject_on_worker_lost=True, ignore_result=True, send_events=False
)
def translate_dataset_task(translation_id: str) -> str:
    """Idempotent by id: a redelivery resumes, or finds the work over."""
    try:
        return translating.make(translation_id)
    except (RequestError, ArtifactStoreError, DataError) as exc:
        reason = exc.detail if isinstance(exc, RequestError) else str(exc)
        log.warning("dataset translation %s failed: %s", translation_id, reason)
    except Exception as exc:  # a bug or an exhausted host: said in the row, never left running
        log.exception("dataset translation %s failed", translation_id)
        reason = f"{type(exc).__name__}: {exc}"
    with session_scope() as session:
        task_rows.fail(session, DatasetTranslation, translation_id, reason)
    return "failed"
