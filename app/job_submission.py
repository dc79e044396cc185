"""Validating and creating a training job (the pure part of POST /v1/jobs)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.api.errors import conflict, unprocessable
from app.api.ratelimit import check_active_jobs
from app.db.models import Dataset, Job
from app.schemas.jobs import JobCreate, ModelSpec
from app.settings import Settings
from model.anatomy import count_parameters, estimate_memory, parameter_groups
from model.budget import AUTO_FIELDS, MIN_BATCH_TOKENS
from model.config import ModelConfig

REQUIRED_KIND = {"translation": "parallel", "denoising": "monolingual"}
GB = 1024**3


def auto_fields(body: JobCreate) -> list[str]:
    """The settings the worker is to choose from the time budget (model/budget.py): with max_minutes, those of
    vocab_size, max_tokens_per_batch, warmup_steps and max_steps that the request left out."""
    if body.training.max_minutes is None:
        return []
    given = {"model": body.model.model_fields_set, "training": body.training.model_fields_set}
    return [name for name, section in AUTO_FIELDS.items() if name not in given[section]]


def request_digest(body: JobCreate) -> str:
    payload = body.model_dump(mode="json")
    if auto := auto_fields(body):  # leaving a setting out is not the same request as giving its default
        payload["auto"] = auto
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _dataset(session: Session, owner_id: str, dataset_id: str, field: str, objective: str) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or dataset.owner_id != owner_id:
        raise unprocessable(field, f"dataset {dataset_id} not found")
    if dataset.kind != REQUIRED_KIND[objective]:
        raise unprocessable(
            field,
            f"dataset {dataset_id} is {dataset.kind}, but objective {objective!r} "
            f"needs a {REQUIRED_KIND[objective]} dataset",
        )
    return dataset


def resolve_model_config(spec: ModelSpec) -> ModelConfig:
    """The preset plus overrides as a ModelConfig, or 422 naming the problem."""
    try:
        return ModelConfig.from_preset(spec.preset, spec.vocab_size, **spec.overrides())
    except ValueError as exc:
        raise unprocessable("model", str(exc)) from exc


def describe_anatomy(config: ModelConfig, tokens_per_batch: int) -> dict[str, Any]:
    """The fields of app.schemas.inference.Anatomy for a config."""
    counts = count_parameters(config)
    return {
        "total_parameters": counts["total"],
        "by_component": counts["by_component"],
        "by_kind": counts["by_kind"],
        "parameters": parameter_groups(config),
        "memory": estimate_memory(config, tokens_per_batch),
        "tokens_per_batch": tokens_per_batch,
    }


def validate(session: Session, settings: Settings, owner_id: str, body: JobCreate) -> ModelConfig:
    """Everything that can be known before queueing; raises 422 naming the field."""
    _dataset(session, owner_id, str(body.dataset_id), "dataset_id", body.objective)
    if body.valid_dataset_id is not None:
        _dataset(session, owner_id, str(body.valid_dataset_id), "valid_dataset_id", body.objective)
    config = resolve_model_config(body.model)
    training = body.training
    if training.max_length + 2 > config.max_positions:
        raise unprocessable(
            "training.max_length",
            f"max_length={training.max_length} plus <s>/</s> exceeds the model's max_positions={config.max_positions}",
        )
    auto = auto_fields(body)
    # A batch size the worker chooses holds the longest sentence and starts at MIN_BATCH_TOKENS.
    batch_tokens = (
        max(MIN_BATCH_TOKENS, training.max_length + 2)
        if "max_tokens_per_batch" in auto
        else training.max_tokens_per_batch
    )
    if "max_tokens_per_batch" not in auto and training.max_tokens_per_batch < training.max_length + 2:
        raise unprocessable(
            "training.max_tokens_per_batch",
            f"max_tokens_per_batch={training.max_tokens_per_batch} cannot hold one sentence of "
            f"max_length={training.max_length} tokens",
        )
    if training.average_last > training.keep_checkpoints:
        raise unprocessable(
            "training.average_last",
            f"average_last={training.average_last} needs keep_checkpoints "
            f">= {training.average_last}, got {training.keep_checkpoints}",
        )
    if training.devices > settings.max_devices_per_job:
        raise unprocessable(
            "training.devices",
            f"devices={training.devices} exceeds the limit of {settings.max_devices_per_job} (MAX_DEVICES_PER_JOB)",
        )
    memory = estimate_memory(config, batch_tokens)["training_total_bytes"]
    if memory > settings.worker_memory_limit_gb * GB:
        raise unprocessable(
            "training.max_tokens_per_batch",
            f"estimated training memory {memory / GB:.1f} GB at {batch_tokens} tokens per batch "
            f"exceeds the worker limit of "
            f"{settings.worker_memory_limit_gb:g} GB (WORKER_MEMORY_LIMIT_GB); lower "
            f"max_tokens_per_batch or the model size",
        )
    return config


def create(
    session: Session, settings: Settings, owner_id: str, body: JobCreate, idempotency_key: str | None
) -> tuple[Job, bool]:
    """Insert the job (status queued). Returns (job, created); an idempotent replay returns the first job."""
    digest = request_digest(body)
    if idempotency_key is not None:
        existing = _by_idempotency_key(session, owner_id, idempotency_key)
        if existing is not None:
            return _replay(existing, digest, idempotency_key), False
    validate(session, settings, owner_id, body)
    check_active_jobs(session, settings, owner_id)  # 429 over MAX_ACTIVE_JOBS_PER_KEY
    job = Job(
        owner_id=owner_id,
        dataset_id=str(body.dataset_id),
        valid_dataset_id=str(body.valid_dataset_id) if body.valid_dataset_id else None,
        objective=body.objective,
        model_config=body.model.model_dump(mode="json"),
        training_config=body.training.model_dump(mode="json"),
        max_attempts=settings.job_max_attempts,
        auto_settings={"fields": auto} if (auto := auto_fields(body)) else None,
        total_steps=body.training.max_steps,
        idempotency_key=idempotency_key,
        request_sha256=digest,
    )
    session.add(job)
    try:
        session.commit()
    except IntegrityError:  # a concurrent request with the same Idempotency-Key won the race
        session.rollback()
        existing = _by_idempotency_key(session, owner_id, idempotency_key) if idempotency_key else None
        if existing is None:
            raise
        assert idempotency_key is not None  # found by it
        return _replay(existing, digest, idempotency_key), False
    return job, True


def _by_idempotency_key(session: Session, owner_id: str, key: str) -> Job | None:
    return session.scalar(select(Job).where(Job.owner_id == owner_id, Job.idempotency_key == key))


def _replay(job: Job, digest: str, key: str) -> Job:
    if job.request_sha256 != digest:
        raise conflict(f"Idempotency-Key {key!r} was used for a different request (job {job.id})")
    return job
