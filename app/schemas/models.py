"""Schemas of trained models and of the registry: names, versions, tags, aliases and their history."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from app.schemas.common import Input, Language, Output
from app.schemas.jobs import Objective, Tags
from app.schemas.registry_names import RegisteredName

Description = Annotated[str, Field(max_length=10_000)]
# An SPDX licence identifier as the Hugging Face Hub takes them in lowercase (apache-2.0, mit, cc-by-4.0), or "other".
License = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9.+-]{0,63}$",
        description="an SPDX licence identifier, e.g. apache-2.0, mit, cc-by-4.0, or other",
    ),
]
MODEL_BEAM_DESCRIPTION = (
    "the beam its translations, translated files and evaluations decode with when the request names none (at most "
    "MAX_BEAM_SIZE; 1: greedy, as distilled students are served); null: 4"
)


class ModelUpdate(Input):
    """PATCH /v1/models/{id}: only the fields given change; null clears. A new name makes the model that name's
    next version (its aliases under the old name are removed); null unregisters it."""

    name: RegisteredName | None = None
    tags: Tags | None = Field(None, description="replaces the model's tags")
    description: Description | None = None
    source_language: Language | None = None
    target_language: Language | None = None
    license: License | None = None
    beam_size: int | None = Field(None, ge=1, description=MODEL_BEAM_DESCRIPTION)


class ConfidenceCalibration(Output):
    """When a translation of this model is flagged low_confidence: its confidence is below `threshold`, found on the
    job's validation pairs (model/decode/calibration.py), where it flagged `flagged_share` of them."""

    threshold: float = Field(description="translations less confident than this are flagged low_confidence")
    sentences: int = Field(description="validation pairs it was calibrated on")
    flagged_share: float = Field(description="the share of those it flags")
    flagged_chrf: float | None = Field(description="their mean sentence chrF (0-100); null when none is flagged")
    other_chrf: float = Field(description="the mean sentence chrF of the others")
    spearman: float | None = Field(
        description="rank correlation of confidence with sentence chrF over those pairs: how far the flag can be "
        "trusted (null when either is constant)"
    )
    beam_size: int
    backend: str = Field(description="the backend that translated them")


class ModelPairPublic(Output):
    source_language: str
    target_language: str


class KeptLayers(Output):
    """The layers of its parent a cut model kept: the first, the last and evenly between (model/train/shrink.py)."""

    encoder: list[int]  # the parent's encoder layers, by index from 0
    decoder: list[int]
    encoder_of: int  # how many the parent had
    decoder_of: int


class ModelPublic(Output):
    id: str
    name: str | None = None  # registered name; None: unregistered
    version: int | None = None  # its version under `name`: `name@version` reaches it
    tags: list[str] = []
    description: str | None = None
    aliases: list[str] = []  # aliases of `name` pointing at this version: `name@alias` reaches it
    source_language: str | None = None
    target_language: str | None = None
    license: str | None = None  # as its owner set it; exports' model cards say it
    beam_size: int | None = Field(None, description=MODEL_BEAM_DESCRIPTION)
    job_id: str | None  # None: imported (POST /v1/models/import)
    job_deleted: bool = False  # the job that trained it was deleted: `job_id` names it, nothing more is left
    objective: Objective
    config: dict[str, Any]
    parameters: int
    tokenizer_fingerprint: str
    metrics: dict[str, float]
    source: str
    size_bytes: int
    parent_model_id: str | None = None  # the model its job started from (fine-tuning)
    parent_model_deleted: bool = False  # that model was deleted since: `parent_model_id` names it
    cut_from: KeptLayers | None = Field(
        None,
        description="a model whose job started from fewer of its parent's layers (shrink and fine-tune): the "
        "parent's layers it kept, by index; null when it kept them all, has no parent or the parent was deleted",
    )
    sha256: str
    created_at: datetime
    confidence_calibration: ConfidenceCalibration | None = Field(
        None, description="the low-confidence flag's threshold and how it split the validation pairs; null: no flag"
    )
    pairs: list[ModelPairPublic] | None = Field(
        None,
        description="a model of several language pairs: each one it was trained on (translate with target_language, "
        "one of their targets); null: a model of one pair",
    )

    @field_validator("pairs", mode="before")
    @classmethod
    def _pairs_as_stored(cls, pairs: Any) -> Any:
        """The models table keeps [[source, target], ...]."""
        if isinstance(pairs, list) and all(isinstance(p, list | tuple) and len(p) == 2 for p in pairs):
            return [{"source_language": s, "target_language": t} for s, t in pairs]
        return pairs


class AliasToVersion(Input):
    """PUT /v1/models/{name}/aliases/{alias} by the version's number."""

    version: int = Field(ge=1, le=999_999_999)


class AliasToModel(Input):
    """PUT /v1/models/{name}/aliases/{alias} by the model's id (one registered under that name)."""

    model_id: str = Field(min_length=1, max_length=100)


AliasSet = AliasToVersion | AliasToModel  # exactly one of the two fields


class AliasPublic(Output):
    name: str
    alias: str
    model_id: str
    version: int
    updated_at: datetime


class AliasEventPublic(Output):
    """One move of an alias: from (null: it was new) to (null: removed), by which API key of the owner, when."""

    name: str
    alias: str
    from_model_id: str | None
    from_version: int | None
    to_model_id: str | None
    to_version: int | None
    key_id: str
    key_prefix: str
    created_at: datetime


class AliasOutcomePublic(Output):
    """What a deletion did to one alias: `dropped`, or `moved` to `model_id` (version `version`)."""

    name: str
    alias: str
    action: Literal["dropped", "moved"]
    model_id: str | None = None
    version: int | None = None


class ModelDeleted(Output):
    """DELETE /v1/models/{id}: the model is gone (its files follow, reclaimed by the collector)."""

    id: str
    aliases: list[AliasOutcomePublic] = Field(description="every alias that pointed at it, and what became of it")


class VersionDeleted(Output):
    id: str
    version: int | None


class NameDeleted(Output):
    """DELETE /v1/models/names/{name}: the name, its versions and its aliases are gone."""

    name: str
    versions: list[VersionDeleted]
    aliases: list[AliasOutcomePublic]
