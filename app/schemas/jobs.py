"""Schemas of training jobs, their metrics and checkpoints."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal, get_args
from uuid import UUID

from pydantic import AfterValidator, Field, ValidationError, WithJsonSchema, field_validator, model_validator

from app.schemas.common import Input, Language, Output
from app.schemas.job_pairs import MAX_PAIRS, JobPair, JobPairPublic
from app.schemas.registry_names import RegisteredName
from model.train.settings import DataSettings, TrainSettings

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "pruned"]
Objective = Literal["translation", "denoising"]


# The new rows' share of a mixed fine-tuning (model/data/mixing.py). Chu et al. (2017) oversample the new data to the
# old's size (0.5); adapting a model to 500 corrections on a real domain shift (bench/corrections.py), 0.5 gained 6.9
# BLEU on the new domain and lost 2.4 on the old, 0.25 gained 9.5 and lost none.
DEFAULT_MIX_SHARE = 0.25

Preset = Literal["auto", "tiny", "small", "base", "big"]
PRESETS: tuple[str, ...] = get_args(Preset)
AUTO_PRESET: Literal["auto"] = "auto"
PRESET_BEFORE_AUTO = "tiny"  # the default before a job could leave its preset to the worker


class ModelSpec(Input):
    """A preset plus overrides. Sizes of the paper's Table 3 for `base` and `big`."""

    preset: Preset | None = Field(
        AUTO_PRESET,
        description="the model's size (model/nn/config.py PRESETS), or auto (the default; null means the same): the "
        "worker that first runs the job chooses among the presets that fit its memory from each one's measured "
        "throughput, the time budget and the corpus, overrides applied to each (auto_settings.reasons.preset says "
        "why). A preset named here is trained as it is",
    )
    vocab_size: int = Field(
        8000, ge=300, le=256_000, description="subword vocabulary trained on the job's data (shared source/target)"
    )
    d_model: int | None = Field(None, ge=8, le=16384)
    n_heads: int | None = Field(None, ge=1, le=256)
    n_encoder_layers: int | None = Field(None, ge=1, le=64)
    n_decoder_layers: int | None = Field(None, ge=1, le=64)
    d_ff: int | None = Field(None, ge=8, le=65536)
    dropout: float | None = Field(None, ge=0, lt=1)
    attention_dropout: float | None = Field(None, ge=0, lt=1)
    activation: Literal["relu", "gelu", "swish"] | None = None
    init: Literal["normal", "xavier"] | None = Field(
        None,
        description="weight initialisation: normal = N(0, 0.02) "
        "(Marian, BART; the default but for tiny), xavier = fairseq's "
        "(tiny's default)",
    )
    norm_first: bool | None = Field(None, description="false: post-norm as in the paper; true: pre-norm")
    share_embeddings: bool | None = None
    max_positions: int | None = Field(None, ge=16, le=65536)

    @field_validator("preset")
    @classmethod
    def _null_is_auto(cls, preset: str | None) -> str:
        return AUTO_PRESET if preset is None else preset

    @property
    def auto(self) -> bool:
        """Whether the worker chooses the preset."""
        return self.preset in (None, AUTO_PRESET)

    def overrides(self) -> dict[str, Any]:
        """The fields given besides preset and vocab_size: ModelConfig.from_preset's overrides."""
        return self.model_dump(exclude={"preset", "vocab_size"}, exclude_none=True)

    @classmethod
    def stored(cls, config: dict[str, Any] | None) -> ModelSpec:
        """A job's stored model_config, as stored: checked when the job was submitted, against the bounds of a
        request. A job from an imported model keeps that model's sizes, which may lie outside them (a vocabulary
        under 300), and is still valid. A field it lacks gets its default, but for the preset: every job stores
        one, so a section without it predates auto and trained the default of then, tiny."""
        return cls.model_construct(**{"preset": PRESET_BEFORE_AUTO, **(config or {})})


class TrainingSpec(Input, DataSettings, TrainSettings):
    """A job's `training` section: the trainer's settings and the data's (model/train/settings.py, where each
    field, its bounds and its default are declared once), plus where the job may run. Stored as dumped, defaults
    filled; read back with `stored`."""

    devices: int = Field(
        1,
        ge=1,
        le=64,
        description="data-parallel processes on one worker host (one per GPU, "
        "or CPU processes); the global batch is max_tokens_per_batch x grad_accum_steps x devices. "
        "At most MAX_DEVICES_PER_JOB",
    )
    nodes: int = Field(
        1,
        ge=1,
        le=64,
        description="worker hosts the job spans, each running `devices` processes: the worker that claims the job "
        "and nodes - 1 more of the same device kind, which join it; the global batch grows by the same factor. "
        "At most MAX_NODES_PER_JOB",
    )
    max_restarts: int = Field(
        0,
        ge=0,
        le=100,
        description="data-parallel jobs (devices or nodes above 1): how many times a host restarts its processes "
        "when one of them dies, each time resuming from the last checkpoint, before the job fails",
    )
    accelerator: Literal["any", "gpu", "cpu"] = Field(
        "any",
        description="which workers may train it: any, only GPU workers (the job waits for one), or only CPU ones",
    )

    @classmethod
    def stored(cls, config: dict[str, Any] | None) -> TrainingSpec:
        """A job's stored training_config: a field it lacks (stored before the field existed) gets its default.
        Checked when the job was submitted; one that a bound tightened since refuses is read as it is (the trainer's
        TrainConfig, built from it, then names the field)."""
        try:
            return cls.model_validate(config or {})
        except ValidationError:
            return cls.model_construct(**(config or {}))


TAG_PATTERN = re.compile(r"[A-Za-z0-9\-_.:/]{1,64}")
MAX_TAGS = 20


def _check_tag(tag: str) -> str:
    if not TAG_PATTERN.fullmatch(tag):
        raise ValueError(f"tag {tag!r} must be 1 to 64 characters of letters, digits and -_.:/")
    return tag


def _unique(tags: list[str]) -> list[str]:
    return list(dict.fromkeys(tags))  # duplicates dropped, first occurrence's order kept


# The pattern is in the OpenAPI schema too; the validator gives the message that names the tag.
TAG_SCHEMA = {"type": "string", "pattern": f"^{TAG_PATTERN.pattern}$"}
Tag = Annotated[str, AfterValidator(_check_tag), WithJsonSchema(TAG_SCHEMA)]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS), AfterValidator(_unique)]
JobName = Annotated[str, Field(max_length=200)]
JobNote = Annotated[str, Field(max_length=10_000)]


class JobLabels(Input):
    """What tells experiments apart: a name, tags (filter GET /v1/jobs with ?tag=) and a free-text note."""

    name: JobName | None = None
    tags: Tags = Field(default_factory=list, description=f"at most {MAX_TAGS}; duplicates dropped, order kept")
    note: JobNote | None = None


class JobUpdate(Input):
    """PATCH /v1/jobs/{id}: only the fields given change; null clears a name, note or the tags."""

    name: JobName | None = None
    tags: Tags | None = Field(None, description="replaces the job's tags")
    add_tags: Tags | None = Field(
        None, description="tags added after the job's own (those it has already are kept where they are)"
    )
    remove_tags: Tags | None = Field(None, description="tags taken off (those it lacks are ignored)")
    note: JobNote | None = None


class JobCreate(JobLabels):
    objective: Objective
    # a JSON string (strict would want a UUID object); with `pairs`, their first dataset
    dataset_id: UUID | None = Field(None, strict=False)
    pairs: list[JobPair] | None = Field(
        None,
        min_length=2,
        max_length=MAX_PAIRS,
        description="one model for several language pairs instead of dataset_id: each a parallel dataset whose "
        "declared languages name its pair; each source gets its target language's token (>>de<<) and the pairs "
        "are sampled by training.pair_temperature",
    )
    valid_dataset_id: UUID | None = Field(None, strict=False)
    test_dataset_id: UUID | None = Field(
        None, strict=False, description="a parallel dataset the trained model is evaluated on when the job succeeds"
    )
    model: ModelSpec = ModelSpec()
    training: TrainingSpec = TrainingSpec()
    init_model_id: Annotated[str, AfterValidator(lambda ref: ref if "@" in ref else ref.lower())] | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="start from this model's weights and tokenizer (fine-tuning, continued training): the "
        "architecture and tokenizer are that model's; `model` may only change dropout and attention_dropout. A "
        "model id or a registry reference (name@version, name@alias, name@latest), resolved when the job is "
        "submitted: the job keeps the id it named then",
    )
    mix_dataset_id: UUID | None = Field(
        None,
        strict=False,
        description="mixed fine-tuning (Chu et al., 2017): rows of this dataset (the original data of the model the "
        "job starts from) are sampled among the training rows, so the model learns the new data without forgetting "
        "the old; the training rows are repeated to make `mix_share` of the whole",
    )
    mix_share: float | None = Field(
        None,
        gt=0,
        lt=1,
        description=f"the training rows' share of the mix (default {DEFAULT_MIX_SHARE}); only with mix_dataset_id",
    )
    register_as: RegisteredName | None = Field(
        None,
        description="publish the job's model as this name's next version in the registry when it succeeds (needs "
        "scope models:write, checked again then)",
    )
    source_language: Language | None = Field(
        None,
        description="what the job translates from (BCP 47, e.g. en); its model carries it. A job from a model "
        "takes that model's languages where it gives none",
    )
    target_language: Language | None = Field(None, description="what the job translates to (BCP 47, e.g. de)")

    @model_validator(mode="after")
    def _one_source_of_rows(self) -> JobCreate:
        if self.pairs is None:
            if self.dataset_id is None:
                raise ValueError("give dataset_id (or pairs, for a model of several language pairs)")
        elif self.dataset_id is None:
            self.dataset_id = self.pairs[0].dataset_id
        elif self.dataset_id != self.pairs[0].dataset_id:
            raise ValueError("give dataset_id or pairs, not both: a job of several pairs trains on the pairs' datasets")
        return self


class Progress(Output):
    step: int
    total_steps: int
    fraction: float = Field(description="done of the budget that binds: steps, or minutes (`bound_by`)")
    tokens_seen: int
    tokens_per_second: float | None
    eta_seconds: float | None
    bound_by: Literal["steps", "time"] = Field(
        "steps", description="the budget that ends the run first: max_steps, or max_minutes at the current pace"
    )
    elapsed_seconds: float | None = Field(None, description="training seconds spent of max_minutes, when time binds")
    budget_seconds: float | None = Field(None, description="max_minutes in seconds; null without a time budget")


class MetricPoint(Output):
    step: int
    value: float


class AutoSettings(Output):
    """Settings chosen by the worker: from the time budget, because the job gave max_minutes without them; the
    preset (and the dropout that follows it), because the job left it to the worker; whether to compile."""

    fields: list[str] = Field(
        description="what the job left to the worker: the budget's settings, preset, and compile when it left that out"
    )
    chosen: dict[str, bool | int | float | str] | None = Field(
        None,
        description="the values, once the worker has chosen them (they are "
        "also in the job's model and training sections)",
    )
    reasons: dict[str, str] | None = Field(None, description="why each value, in words")
    inputs: dict[str, Any] | None = Field(
        None,
        description="what the choice was made from: corpus size, longest "
        "example, measured throughput, ...; the same inputs give the same choice",
    )
    expected_updates: int | None = None
    throughput: Literal["measured", "pinned"] | None = Field(
        None,
        description="batch tokens/s timed on a few steps of this job (on a GPU at several batch sizes: "
        "inputs.throughput_curve), or pinned by WORKER_TOKENS_PER_SECOND",
    )
    probe_seconds: float | None = Field(None, description="how long the timed steps took")
    preset_inputs: dict[str, Any] | None = Field(
        None,
        description="what model.preset was chosen from: each candidate's parameters, memory and measured (or "
        "estimated) batch tokens/s, the corpus's tokens, the budget; and predictions, each candidate's tokens, "
        "epochs and predicted loss (model/train/size_choice.py)",
    )
    compile_inputs: dict[str, Any] | None = Field(
        None,
        description="what training.compile was chosen from: the graphs the run would compile (one per length "
        "bucket its batches reach) and how long it trains (the time budget, or its steps at the measured pace)",
    )


class JobPublic(Output):
    id: str
    name: str | None = None
    tags: list[str] = []
    note: str | None = None
    source_language: str | None = None
    target_language: str | None = None
    objective: Objective
    status: JobStatus
    attempt: int
    max_attempts: int
    error: str | None
    cancel_requested: bool
    dataset_id: str | None
    dataset_name: str | None = Field(None, description="the name of the dataset it trains on (None once deleted)")
    valid_dataset_id: str | None
    test_dataset_id: str | None = None
    init_model_id: str | None = None  # the model it started from
    mix_dataset_id: str | None = None
    pairs: list[JobPairPublic] | None = Field(None, description="a model of several language pairs: each pair")
    mix_share: float | None = None
    register_as: str | None = None
    model: ModelSpec
    training: TrainingSpec
    progress: Progress
    latest_metrics: dict[str, MetricPoint] | None = None
    model_id: str | None = None
    auto_settings: AutoSettings | None = None
    device: str | None
    # Queued for its datasets while a worker parses them ("dataset <id> to be parsed"), or for a kind of worker none
    # of which is alive now (training.accelerator "gpu" or "cpu"): it starts when one comes, e.g. "a GPU worker".
    waiting_for: str | None = None
    sweep_id: str | None = Field(None, description="the sweep this job is a trial of (GET /v1/sweeps/{id})")
    trial_number: int | None = None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime


class Series(Output):
    steps: list[int]
    values: list[float]
    total_points: int


class MetricsPublic(Output):
    job_id: str
    series: dict[str, Series]
    # Everything up to this point is in `series`: pass it as Last-Event-ID to /events to stream only what follows.
    last_event_id: int = 0


class CheckpointPublic(Output):
    step: int
    metrics: dict[str, float]
    size_bytes: int
    sha256: str
    created_at: datetime


class ComparedSeries(Output):
    """One metric of a compared job: every point, and its best and final value (app/services/job_comparison.py)."""

    steps: list[int]
    values: list[float]
    seconds: list[float] | None = Field(
        description="wall-clock seconds from the job's start to each point's recording; null before it started"
    )
    total_points: int
    best: float | None = Field(description="lowest for losses and perplexities, highest for scores; else null")
    best_step: int | None
    final: float
    final_step: int


class ComparedJob(Output):
    id: str
    name: str | None
    tags: list[str]
    status: JobStatus
    objective: Objective
    settings: dict[str, Any] = Field(description="the stored model and training sections as dotted keys")
    metrics: dict[str, ComparedSeries]


class JobComparison(Output):
    jobs: list[ComparedJob]
    differing: list[str] = Field(description="the sorted settings keys whose values are not the same in every job")
