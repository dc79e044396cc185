"""Schemas of corrections to a model's translations, and of adapting a model to them."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import Field

from app.schemas.common import Input, Output
from app.schemas.jobs import DEFAULT_MIX_SHARE, JobName, TrainingSpec
from app.schemas.registry_names import RegisteredName

MAX_CORRECTION_CHARS = 5000  # a segment, not a document: the translate route's own limit on a text


class CorrectionCreate(Input):
    """POST /v1/models/{id}/corrections: one segment as the model translated it and as a person corrected it."""

    source: str = Field(min_length=1, max_length=MAX_CORRECTION_CHARS, description="the text that was translated")
    translation: str = Field(
        "", max_length=MAX_CORRECTION_CHARS, description="the model's translation as it was given (kept for review)"
    )
    corrected: str = Field(min_length=1, max_length=MAX_CORRECTION_CHARS, description="the translation as it should be")


class CorrectionPublic(Output):
    id: str
    model_id: str
    source: str
    translation: str
    corrected: str
    key_prefix: str = Field(description="the API key that sent it")
    created_at: datetime


class AdaptationCreate(Input):
    """POST /v1/models/{id}/adaptations: fine-tune the model on its corrections (and its ancestors'), mixed with
    its original training data, into the next version of its name."""

    max_minutes: float = Field(2.0, gt=0, le=24 * 60, description="the adaptation job's time budget")
    mix_dataset_id: UUID | None = Field(
        None,
        strict=False,
        description="the data mixed in so the model does not forget (default: the dataset its job trained on)",
    )
    mix_share: float = Field(
        DEFAULT_MIX_SHARE, gt=0, lt=1, description="the corrections' share of the training rows (repeated to make it)"
    )
    register_as: RegisteredName | None = Field(
        None, description="the registry name the adapted model is published under (default: the model's own name)"
    )
    name: JobName | None = Field(None, description="the adaptation job's name")
    training: TrainingSpec | None = Field(
        None,
        description="training settings for the job (as POST /v1/jobs takes them; an adaptation's own defaults: "
        "best_metric chrf, lr_scale 0.1); max_minutes wins",
    )


class AdaptationPublic(Output):
    job_id: str = Field(description="the adaptation job (GET /v1/jobs/{id}); its model is the new version")
    dataset_id: str = Field(description="the corrections as a dataset (its `lineage` names the models)")
    corrections: int = Field(description="distinct sources corrected, the latest correction of each")
    models: list[str] = Field(description="the models whose corrections it gathers: this one and its ancestors")
    register_as: str
    mix_dataset_id: str
