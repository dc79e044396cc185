"""Build a model's downloadable export once and keep it in the artifact store (the API streams it from there).

Idempotent: an export already stored is not built again, and two workers building the same one write the same
key whole (the store's push replaces a file all at once), so a redelivered or repeated task is harmless.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

from celery import shared_task

from app.artifacts import ArtifactNotFound, ArtifactStoreError, get_store
from app.core.settings import get_settings
from app.core.task_names import EXPORT
from app.db.session import session_scope
from app.db.tables import TrainedModel
from app.services.exports import export_key, export_name
from app.services.model_card import card_digest
from model.io.checkpoint_files import CheckpointError
from model.io.export_archive import build_export
from worker.serving.errors import ModelUnavailable
from worker.tasks.inference import INFERENCE_TASK, errors_as_results

log = logging.getLogger(__name__)


@shared_task(name=EXPORT, **INFERENCE_TASK)  # type: ignore[untyped-decorator]  # celery ships no types
@errors_as_results
def export_task(model_id: str, fmt: str, quantization: str | None = None, card: str | None = None) -> dict[str, Any]:
    """Build the export with `card` as its README.md (the API renders it: app/services/model_card.py); its digest
    is part of the key (the card names the model's default beam, which a huggingface export's generation_config
    carries)."""
    with session_scope() as session:
        row = session.get(TrainedModel, model_id)
        if row is None:
            raise ModelUnavailable(404, f"model {model_id} not found")
        storage_key, sha256, beam_size = row.storage_key, row.sha256, row.beam_size
    digest = card_digest(card) if card is not None else ""
    key = export_key(model_id, sha256, fmt, quantization, digest)  # ValueError (422) names a bad format or quantization
    store = get_store()
    try:
        if store.exists(key):
            return {"key": key, "built": False}
        with store.in_use(storage_key):
            checkpoint = store.fetch(storage_key)
            scratch = get_settings().data_dir.resolve() / "exports"
            scratch.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=scratch) as tmp:
                name = export_name(model_id, fmt, quantization)
                archive = build_export(checkpoint, fmt, f"{tmp}/{name}.tar.gz", name, quantization, card, beam_size)
                size = archive.stat().st_size
                store.push(archive, key)
    except ArtifactNotFound as exc:
        raise ModelUnavailable(
            503, f"model {model_id}: its files are missing from the artifact store; retrain it or restore them"
        ) from exc
    except ArtifactStoreError as exc:
        raise ModelUnavailable(503, f"model {model_id}: the artifact store is unavailable; try again") from exc
    except CheckpointError as exc:
        raise ModelUnavailable(
            503, f"model {model_id}: its files fail verification; retrain or restore them ({exc})"
        ) from exc
    log.info("model %s exported as %s (%d bytes)", model_id, key, size)
    return {"key": key, "built": True, "size_bytes": size}
