"""A job that leaves settings to its time budget, as the worker reads it (JobRows), for the tests of the worker's
automatic settings (tests/worker/test_auto_settings.py, tests/worker/test_auto_preset.py)."""

from __future__ import annotations

from app.db.tables import Job
from app.schemas.jobs import ModelSpec, TrainingSpec
from worker.training.job_data import JobRows

ALL = ["vocab_size", "max_tokens_per_batch", "warmup_steps", "max_steps"]


def job_rows(corpus, fields: list[str], **training) -> JobRows:
    """A job on the corpus leaving `fields` to its 2-minute budget (and training.compile given, unless in training)."""
    training = {"compile": False, "max_minutes": 2, "max_length": 40, "seed": 3, **training}
    job = Job(
        id="job-1",
        objective="translation",
        model_config=ModelSpec(preset="tiny").model_dump(mode="json"),
        training_config=TrainingSpec(**training).model_dump(mode="json"),
        auto_settings={"fields": fields},
    )
    return JobRows(job, list(corpus[0]), list(corpus[1]))
