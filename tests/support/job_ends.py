"""A job's end written as its worker writes it, for tests that move pipelines on without training."""

from __future__ import annotations

from typing import Any


def end_job(session: Any, job_id: str, status: str = "succeeded", error: str | None = None) -> str | None:
    """Succeeded with a model (whose id is returned; no files: nothing loads it), or failed with `error`."""
    from app.db.base import utcnow
    from app.db.tables import Job, TrainedModel
    from model.nn.config import ModelConfig

    job = session.get(Job, job_id)
    job.status, job.error, job.finished_at = status, error, utcnow()
    if status != "succeeded":
        return None
    model = TrainedModel(
        owner_id=job.owner_id, job_id=job.id, objective="translation",
        config=ModelConfig.from_preset("tiny", 300).to_dict(), tokenizer_fingerprint="f", metrics={},
        source="last@5", parameters=1, storage_key="models/none", sha256="0" * 64, size_bytes=1,
        source_language=job.source_language, target_language=job.target_language,
    )  # fmt: skip
    session.add(model)
    session.flush()
    return str(model.id)
