"""Schemas of pipelines: back-translation and distillation carried out as chains of ordinary jobs, dataset
translations and filtered datasets (app/services/pipeline_runner.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Discriminator, Field, Tag

from app.schemas.common import Input, Output
from app.schemas.dataset_translations import DatasetDecoding
from app.schemas.datasets import FilterRules
from app.schemas.jobs import ModelSpec, TrainingSpec
from app.schemas.registry_names import RegisteredName

PipelineStatus = Literal["running", "succeeded", "failed", "cancelled"]
StepKind = Literal["train", "translate", "filter"]
StepStatus = Literal["waiting", "running", "succeeded", "failed", "cancelled"]
ModelRef = Annotated[str, Field(min_length=1, max_length=200)]


def _synthetic_cleaning() -> FilterRules:
    return FilterRules(drop_empty=True, deduplicate=True, drop_copies=True, max_ratio=3.0)


def _distilled_cleaning() -> FilterRules:
    """What a teacher gets wrong and a student should not learn: a dropped or invented placeholder, an empty or
    runaway output. Copies stay (the original pairs have as many: names, commands, "OK")."""
    return FilterRules(drop_empty=True, max_ratio=3.0, drop_placeholder_mismatches=True)


class StepJob(Input):
    """A training step's job: `model` and `training` as POST /v1/jobs takes them (only what is given is kept; the
    step's own defaults and the job's fill the rest)."""

    model: ModelSpec = Field(default_factory=ModelSpec)
    training: TrainingSpec = Field(default_factory=TrainingSpec)

    def given(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class BacktranslationCreate(Input):
    """Back-translation (Sennrich et al., 2016; tagged, Caswell et al., 2019): a reverse model (given, or trained
    first on the parallel data's pairs reversed) translates target-language text into synthetic sources; the
    synthetic pairs are cleaned, and the forward model trains on the real pairs mixed among them."""

    kind: Literal["backtranslation"]
    name: str = Field(min_length=1, max_length=200)
    dataset_id: UUID = Field(strict=False, description="the real parallel pairs (source -> target)")
    monolingual_dataset_id: UUID = Field(strict=False, description="text in the target language, to back-translate")
    valid_dataset_id: UUID | None = Field(None, strict=False, description="real pairs the jobs validate on")
    reverse_model_id: ModelRef | None = Field(
        None, description="a model translating target -> source (an id or name@alias); none: one is trained first"
    )
    reverse_job: StepJob = Field(
        default_factory=StepJob, description="the reverse model's job, when one is trained (training.reverse is set)"
    )
    decoding: DatasetDecoding = Field(
        default_factory=lambda: DatasetDecoding(method="sampling", top_k=10),
        description="how the reverse model translates: sampling among the 10 likeliest tokens by default",
    )
    tag: str | None = Field(
        "<BT>", min_length=1, max_length=20, pattern=r"^\S+$", description="before every synthetic source; null: none"
    )
    max_sentences: int | None = Field(None, ge=1, description="back-translate the first N rows only")
    cleaning: FilterRules | None = Field(
        default_factory=_synthetic_cleaning,
        description="rules applied to the synthetic pairs (POST /v1/datasets/{id}/filter's); null: none",
    )
    real_share: float = Field(
        0.5, gt=0, lt=1, description="the real pairs' share of the forward job's training rows (repeated to make it)"
    )
    job: StepJob = Field(default_factory=StepJob, description="the forward model's job")
    register_as: RegisteredName | None = Field(None, description="the name the forward model is published under")


class DistillationCreate(Input):
    """Sequence-level distillation (Kim and Rush, 2016): a teacher translates the training sources, and a student
    (smaller: faster to serve) learns from those translations, optionally mixed with the original pairs."""

    kind: Literal["distillation"]
    name: str = Field(min_length=1, max_length=200)
    teacher_model_id: ModelRef = Field(description="the teacher (an id or name@alias)")
    dataset_id: UUID = Field(strict=False, description="parallel pairs whose sources the teacher translates")
    valid_dataset_id: UUID | None = Field(None, strict=False, description="real pairs the student validates on")
    decoding: DatasetDecoding = Field(default_factory=DatasetDecoding, description="the teacher's: beam 4 by default")
    max_sentences: int | None = Field(None, ge=1, description="translate the first N rows only")
    cleaning: FilterRules | None = Field(
        default_factory=_distilled_cleaning,
        description="rules applied to the teacher's pairs (POST /v1/datasets/{id}/filter's); null: none",
    )
    original_share: float | None = Field(
        None, gt=0, lt=1, description="mix the original pairs in at this share of the student's rows; null: none"
    )
    student_init: Literal["fresh", "teacher"] = Field(
        "fresh",
        description="the student's start: `fresh` weights of its preset, or the `teacher`'s width with a subset of "
        "its layers (shrink and fine-tune: job.model gives only n_encoder_layers and n_decoder_layers, at most the "
        "teacher's)",
    )
    job: StepJob = Field(
        default_factory=lambda: StepJob.model_validate({"model": {"preset": "tiny"}}),
        description="the student's job (its preset: tiny by default)",
    )
    register_as: RegisteredName | None = Field(None, description="the name the student is published under")
    student_beam_size: int | None = Field(
        None,
        ge=1,
        description="the student's default beam (its model's beam_size, at most MAX_BEAM_SIZE): 1 serves it greedily, "
        "as Bergamot serves its students (a student of a teacher's beam outputs loses little by it: Kim and Rush, "
        "2016); null: 4",
    )


def _kind(value: Any) -> str | None:
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


# By `kind` (a callable discriminator: Input's NUL check on every field rules out naming the field)
PipelineCreate = Annotated[
    Annotated[BacktranslationCreate, Tag("backtranslation")] | Annotated[DistillationCreate, Tag("distillation")],
    Discriminator(_kind),
]


class StepPublic(Output):
    name: str
    kind: StepKind
    id: str | None = Field(description="the step's job, dataset translation or dataset, once started")
    status: StepStatus
    error: str | None = None
    url: str | None = Field(None, description="where to poll the step's object")
    output: dict[str, str] | None = Field(None, description="what it made: model_id, dataset_id")
    earlier: list[str] = Field(default_factory=list, description="ids of the attempts a retry replaced")


class PipelinePublic(Output):
    id: str
    kind: Literal["backtranslation", "distillation"]
    name: str
    status: PipelineStatus
    error: str | None
    cancel_requested: bool
    settings: dict[str, Any]
    steps: list[StepPublic]
    model_id: str | None = Field(description="the model the pipeline made, once succeeded")
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
