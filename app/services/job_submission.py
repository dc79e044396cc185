"""Validating and creating a training job (the pure part of POST /v1/jobs)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.scopes import Scope
from app.core.settings import Settings
from app.db.keys import Caller
from app.db.tables import Dataset, Job, JobPair, JobTag
from app.db.worker_rows import largest_gpu_memory
from app.schemas.jobs import DEFAULT_MIX_SHARE, JobCreate, ModelSpec
from app.services import idempotency, init_model, job_pairs, job_visibility
from app.services.datasets import refuse_failed
from app.services.errors import Conflict, Forbidden, InvalidField
from app.services.job_quota import check_active_jobs
from model.data.language_pairs import DEFAULT_TEMPERATURE
from model.nn.config import ModelConfig
from model.probes.anatomy import count_parameters, estimate_memory, parameter_groups
from model.train.budget import AUTO_FIELDS, MIN_BATCH_TOKENS, batch_lr_scale
from model.train.size_choice import PRESET_FIELD, PRESET_ORDER

REQUIRED_KIND = {"translation": "parallel", "denoising": "monolingual"}
GB = 1024**3


@dataclass(frozen=True)
class MemoryLimit:
    device: str  # cpu | gpu
    bytes: int
    default_precision: str  # a job's precision when it gives none: bf16 on a GPU, fp32 on a CPU
    source: str  # where the figure comes from, for messages


def auto_fields(body: JobCreate) -> list[str]:
    """The settings the worker is to choose from the time budget (model/train/budget.py): with max_minutes, those of
    vocab_size, max_tokens_per_batch, warmup_steps and max_steps that the request left out."""
    if body.training.max_minutes is None:
        return []
    given = {"model": body.model.model_fields_set, "training": body.training.model_fields_set}
    if body.init_model_id is not None:  # the vocabulary is the init model's tokenizer's
        given["model"] = given["model"] | {"vocab_size"}
    return [name for name, section in AUTO_FIELDS.items() if name not in given[section]]


def worker_fields(body: JobCreate) -> list[str]:
    """What the worker chooses for the job: auto_fields, and the preset when the job leaves it to the worker (a job
    starting from a model keeps that model's architecture)."""
    preset = [PRESET_FIELD] if body.model.auto and body.init_model_id is None else []
    return auto_fields(body) + preset


def request_digest(body: JobCreate) -> str:
    payload = body.model_dump(mode="json")
    # left out when empty: a request from before labels, languages and mixing keeps its digest
    for label in ("name", "tags", "note", "source_language", "target_language", "mix_dataset_id", "mix_share", "pairs"):
        if not payload[label]:
            del payload[label]
    if payload["register_as"] is None:
        del payload["register_as"]
    before = (
        ("best_metric", "loss"),
        ("reverse", False),
        ("pair_temperature", DEFAULT_TEMPERATURE),
        ("best_pair", None),
    )
    for setting, default in before:  # defaults from before the settings
        if payload["training"].get(setting) == default:
            del payload["training"][setting]
    if auto := auto_fields(body):  # leaving a setting out is not the same request as giving its default
        payload["auto"] = auto
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _dataset(session: Session, owner_id: str, dataset_id: str, field: str, objective: str) -> Dataset:
    # Held (FOR SHARE) until the job commits: a deletion at the same moment waits and then sees the job, or went
    # first and the dataset is gone (app/services/deletion.delete_dataset).
    dataset = session.get(Dataset, dataset_id, with_for_update={"read": True}, populate_existing=True)
    if dataset is None or dataset.owner_id != owner_id:
        raise InvalidField(field, f"dataset {dataset_id} not found")
    if dataset.kind != REQUIRED_KIND[objective]:
        raise InvalidField(
            field,
            f"dataset {dataset_id} is {dataset.kind}, but objective {objective!r} "
            f"needs a {REQUIRED_KIND[objective]} dataset",
        )
    refuse_failed(dataset, field)  # one still processing is fine: the job waits for it
    return dataset


# lr_scale by default: a quarter of the paper's rate when starting from a trained model; otherwise it follows the
# batch (model/train/budget.py batch_lr_scale), chosen here when the job gives its batch and by the worker when it
# chooses the batch. Fine-tuning the tiny numbers model (0-999) on 1000-1999, warm-up 30, held-out exact of 24: after
# 200 steps 0 at 1.0 and 1 at 0.5 (the re-warmed rate wrecks its weights), 0 at 0.1 (too slow), 8-18 at 0.25, a
# fresh model 0; after 400 steps 15-19 at 0.25 (two seeds), 16 at 0.5.
FINE_TUNE_LR_SCALE = 0.25


def _check_mix(session: Session, owner_id: str, body: JobCreate) -> None:
    """mix_dataset_id names another usable dataset of the job's kind; mix_share needs it."""
    if body.mix_dataset_id is None:
        if body.mix_share is not None:
            raise InvalidField("mix_share", "mix_share is the training rows' share of a mix: give mix_dataset_id too")
        return
    if body.mix_dataset_id == body.dataset_id:
        raise InvalidField("mix_dataset_id", f"dataset {body.mix_dataset_id} is the training dataset itself")
    _dataset(session, owner_id, str(body.mix_dataset_id), "mix_dataset_id", body.objective)


def check_registering(key: Caller, body: JobCreate) -> None:
    """register_as publishes the model under a name: the key must be allowed to (scope models:write)."""
    if body.register_as is not None and Scope.MODELS_WRITE not in key.scopes:
        raise Forbidden(
            f"register_as needs scope 'models:write', which API key {key.prefix}... lacks; leave register_as out "
            "and register the model with PATCH /v1/models/{id} once it is trained"
        )


def default_learning_rate(body: JobCreate) -> JobCreate:
    """The body with training.lr_scale set when it was left out: FINE_TUNE_LR_SCALE from a model, else the batch's
    (batch_lr_scale); left out still when the worker chooses the batch (it sets the scale with it)."""
    training = body.training
    if training.lr_scale is not None:
        return body
    if body.init_model_id is not None:
        scale = FINE_TUNE_LR_SCALE
    elif "max_tokens_per_batch" not in auto_fields(body):
        scale = batch_lr_scale(training.max_tokens_per_batch * training.grad_accum_steps)
    else:
        return body
    return body.model_copy(update={"training": training.model_copy(update={"lr_scale": scale})})


def candidate_configs(spec: ModelSpec) -> list[tuple[str, ModelConfig]]:
    """(preset, ModelConfig) of what the spec may train: its preset plus overrides; with preset auto, each preset
    (smallest first) that the overrides make a valid config of. InvalidField (422) naming the problem if none."""
    names = PRESET_ORDER if spec.auto else (str(spec.preset),)
    configs, errors = [], []
    for name in names:
        try:
            configs.append((name, ModelConfig.from_preset(name, spec.vocab_size, **spec.overrides())))
        except ValueError as exc:
            errors.append(f"{exc} ({name})" if spec.auto else str(exc))
    if not configs:
        raise InvalidField("model", "; ".join(errors))
    return configs


def describe_anatomy(config: ModelConfig, tokens_per_batch: int, precision: str = "fp32") -> dict[str, Any]:
    """The fields of app.schemas.inference.Anatomy for a config."""
    counts = count_parameters(config)
    return {
        "total_parameters": counts["total"],
        "by_component": counts["by_component"],
        "by_kind": counts["by_kind"],
        "parameters": parameter_groups(config),
        "memory": estimate_memory(config, tokens_per_batch, precision=precision),
        "tokens_per_batch": tokens_per_batch,
    }


def validate(session: Session, settings: Settings, owner_id: str, body: JobCreate) -> ModelConfig:
    """Everything that can be known before queueing; raises InvalidField (422) naming the field. A section's own
    rules were checked when the request was parsed (its schema: app/schemas/jobs.py, model/train/settings.py); these
    are the rules across sections, the datasets, the model's size and the service's limits."""
    _dataset(session, owner_id, str(body.dataset_id), "dataset_id", body.objective)
    if body.valid_dataset_id is not None:
        _dataset(session, owner_id, str(body.valid_dataset_id), "valid_dataset_id", body.objective)
    if body.test_dataset_id is not None:
        if body.objective != "translation":
            raise InvalidField("test_dataset_id", "only translation models are evaluated on a test set")
        _dataset(session, owner_id, str(body.test_dataset_id), "test_dataset_id", body.objective)
    _check_mix(session, owner_id, body)
    if body.training.reverse and body.objective != "translation":
        raise InvalidField("training.reverse", "reverse swaps the sides of translation pairs; a denoising job has one")
    if body.training.reverse and body.test_dataset_id is not None:
        raise InvalidField(
            "test_dataset_id",
            "a test set is scored source -> target; a reverse job's model translates target -> source",
        )
    if body.training.best_metric != "loss" and body.objective != "translation":
        raise InvalidField(
            "training.best_metric", f"best_metric={body.training.best_metric!r} scores translations; use 'loss'"
        )
    name, config = candidate_configs(body.model)[0]
    training = body.training
    if training.max_length + 2 > config.max_positions:
        raise InvalidField(
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
        raise InvalidField(
            "training.max_tokens_per_batch",
            f"max_tokens_per_batch={training.max_tokens_per_batch} cannot hold one sentence of "
            f"max_length={training.max_length} tokens",
        )
    if training.devices > settings.max_devices_per_job:
        raise InvalidField(
            "training.devices",
            f"devices={training.devices} exceeds the limit of {settings.max_devices_per_job} (MAX_DEVICES_PER_JOB)",
        )
    if training.nodes > settings.max_nodes_per_job:
        raise InvalidField(
            "training.nodes",
            f"nodes={training.nodes} exceeds the limit of {settings.max_nodes_per_job} (MAX_NODES_PER_JOB)",
        )
    # The model first, at the smallest batch it could train with; then the batch the job asks for.
    smallest = min(batch_tokens, max(MIN_BATCH_TOKENS, training.max_length + 2))
    preset = f"the smallest preset the worker may choose, {name}," if body.model.auto else f"preset {name!r}"
    lead = f"{preset} needs more memory to train than any device this job may run on has, even at {{batch}} tokens "
    lead += "per batch"
    refusal = memory_refusal(
        session, settings, config, smallest, training.accelerator, training.precision, lead=lead, advice=PRESET_ADVICE
    )
    if refusal:
        raise InvalidField("model.preset", refusal)
    refusal = memory_refusal(session, settings, config, batch_tokens, training.accelerator, training.precision)
    if refusal:
        raise InvalidField("training.max_tokens_per_batch", refusal)
    return config


def memory_limits(session: Session, settings: Settings, accelerator: str) -> list[MemoryLimit]:
    """The devices a job may run on, each with its memory and default precision. A GPU is the largest any GPU
    training worker has reported; none is listed while no GPU worker has (a GPU job then waits, unrefused)."""
    limits = []
    if accelerator in ("cpu", "any"):
        limits.append(MemoryLimit("cpu", int(settings.worker_memory_limit_gb * GB), "fp32", "WORKER_MEMORY_LIMIT_GB"))
    if accelerator in ("gpu", "any"):
        gpu = largest_gpu_memory(session)
        if gpu:
            limits.append(MemoryLimit("gpu", gpu, "bf16", "the largest GPU of the training workers"))
    return limits


BATCH_LEAD = "estimated training memory at {batch} tokens per batch exceeds every device this job may run on"
BATCH_ADVICE = "lower max_tokens_per_batch or the model size"
PRESET_ADVICE = "choose a smaller preset, or auto: the worker then chooses among those that fit"


def memory_refusal(
    session: Session,
    settings: Settings,
    config: ModelConfig,
    batch_tokens: int,
    accelerator: str,
    precision: str | None,
    lead: str = BATCH_LEAD,
    advice: str = BATCH_ADVICE,
) -> str | None:
    """Why no device the job may run on has the memory it needs at batch_tokens (`lead`, the memory it needs and
    each device's, `advice`), or None if one has (or if it waits for a GPU worker whose memory is not known yet)."""
    limits = memory_limits(session, settings, accelerator)
    if not limits:
        return None
    needs = []
    for limit in limits:
        chosen = precision or limit.default_precision
        memory = estimate_memory(config, batch_tokens, precision=chosen)["training_total_bytes"]
        if memory <= limit.bytes:
            return None
        needs.append(
            f"{memory / GB:.1f} GB in {chosen} on a {limit.device.upper()} "
            f"(limit {limit.bytes / GB:.1f} GB, {limit.source})"
        )
    return f"{lead.format(batch=batch_tokens)}: {'; '.join(needs)}; {advice}"


def create(
    session: Session, settings: Settings, key: Caller, body: JobCreate, idempotency_key: str | None
) -> tuple[Job, bool]:
    """Insert the job (status queued), recording the key that submits it. Returns (job, created); an idempotent
    replay returns the first job."""
    check_registering(key, body)
    digest = request_digest(body)
    owner_id = key.owner_id
    if idempotency_key is not None:
        existing = idempotency.find(session, Job, owner_id, idempotency_key)
        if existing is not None:
            return _replay(key, existing, digest, idempotency_key), False
    job = new_job(
        session, settings, owner_id, body, idempotency_key=idempotency_key, request_sha256=digest, key_id=key.id
    )
    session.add(job)
    try:
        session.commit()
    except IntegrityError:  # a concurrent request with the same Idempotency-Key won the race
        session.rollback()
        existing = idempotency.find(session, Job, owner_id, idempotency_key) if idempotency_key else None
        if existing is None:
            raise
        assert idempotency_key is not None  # found by it
        return _replay(key, existing, digest, idempotency_key), False
    return job, True


def _replay(key: Caller, existing: Job, digest: str, idempotency_key: str) -> Job:
    """The job an Idempotency-Key made, for a key that may see it; a key that may not (scope train alone, another key's
    job) gets 409 naming neither the job nor its request, as it would learn both from the answer."""
    if not job_visibility.may_see(key, existing):
        raise Conflict(
            f"Idempotency-Key {idempotency_key!r} was used by another API key of the organisation; choose another"
        )
    return idempotency.replay(existing, digest, idempotency_key, "job")


def as_run(session: Session, owner_id: str, body: JobCreate) -> tuple[JobCreate, list[JobPair]]:
    """The body as its job runs it (its init model's architecture, its default rate) and its language pairs (none
    for a job of one pair that starts from no model of several); InvalidField naming a problem of them."""
    pairs = job_pairs.pair_rows(session, owner_id, body, _dataset)  # before the fields it refuses are inherited
    body = default_learning_rate(init_model.inherit_model(session, owner_id, body))
    return body, job_pairs.from_init_model(session, owner_id, body, pairs, _dataset)


def new_job(session: Session, settings: Settings, owner_id: str, body: JobCreate, **row: Any) -> Job:
    """The job's row (status queued), validated and within the owner's quota, not yet added to the session; `row`
    sets further columns (idempotency_key, a sweep's trial). Raises InvalidField or TooManyRequests."""
    body, pairs = as_run(session, owner_id, body)
    validate(session, settings, owner_id, body)
    check_active_jobs(session, settings, owner_id)  # TooManyRequests over MAX_ACTIVE_JOBS_PER_KEY
    row.setdefault("request_sha256", request_digest(body))
    return Job(
        owner_id=owner_id,
        dataset_id=str(body.dataset_id),
        valid_dataset_id=str(body.valid_dataset_id) if body.valid_dataset_id else None,
        test_dataset_id=str(body.test_dataset_id) if body.test_dataset_id else None,
        objective=body.objective,
        model_config=body.model.model_dump(mode="json"),
        init_model_id=body.init_model_id,
        mix_dataset_id=str(body.mix_dataset_id) if body.mix_dataset_id else None,
        mix_share=(body.mix_share or DEFAULT_MIX_SHARE) if body.mix_dataset_id else None,
        register_as=body.register_as,
        source_language=body.source_language or job_pairs.common_source(pairs),
        target_language=body.target_language or job_pairs.common_target(pairs),
        pair_rows=pairs,
        training_config=body.training.model_dump(mode="json"),
        max_attempts=settings.job_max_attempts,
        auto_settings={"fields": auto} if (auto := worker_fields(body)) else None,
        total_steps=body.training.max_steps,
        name=body.name,
        note=body.note,
        tag_rows=tag_rows(body.tags),
        **row,
    )


def tag_rows(tags: list[str]) -> list[JobTag]:
    """The job_tags rows of a validated, deduplicated list of tags, in its order."""
    return [JobTag(tag=tag, position=position) for position, tag in enumerate(tags)]
