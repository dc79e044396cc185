"""Schemas of dataset translations: a dataset's text translated by a model in the background into a new parallel
dataset (synthetic pairs for back-translation, a teacher's translations for distillation)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field, model_validator

from app.schemas.common import Input, Language, Output
from app.schemas.inference import BACKEND_DESCRIPTION, AnsweringBackend, Backend

DatasetTranslationStatus = Literal["queued", "running", "succeeded", "failed"]
BEAM_FIELDS = {"beam_size"}
SAMPLING_FIELDS = {"temperature", "top_k", "seed"}


class DatasetDecoding(Input):
    """How the texts are translated: beam search (the likeliest translation, as /translate), or sampling (each
    token drawn from the model's distribution: what back-translation wants, Edunov et al. 2018)."""

    method: Literal["beam", "sampling"] = "beam"
    beam_size: int = Field(4, ge=1, description="beam only: the beam's width (at most MAX_BEAM_SIZE)")
    temperature: float = Field(
        1.0, gt=0, le=10, strict=False, description="sampling only: < 1 sharper (towards greedy), > 1 flatter"
    )
    top_k: int = Field(0, ge=0, le=1000, description="sampling only: draw among the k likeliest tokens; 0: all")
    seed: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="sampling only: with the PyTorch backend the same seed repeats the draws "
        "(CTranslate2's cannot be seeded per call)",
    )

    @model_validator(mode="after")
    def _one_method(self) -> DatasetDecoding:
        foreign = (SAMPLING_FIELDS if self.method == "beam" else BEAM_FIELDS) & self.model_fields_set
        if foreign:
            raise ValueError(f"{sorted(foreign)} do not apply to method {self.method!r}")
        return self

    def settings(self) -> dict[str, Any]:
        """What is stored: the method and its own fields."""
        return self.model_dump(include={"method"} | (BEAM_FIELDS if self.method == "beam" else SAMPLING_FIELDS))


class DatasetTranslationCreate(Input):
    dataset_id: UUID = Field(strict=False, description="a dataset of yours, ready: its text is translated")
    side: Literal["source", "target"] = Field(
        "source", description="which side of a parallel dataset is translated (a monolingual one has one: its text)"
    )
    decoding: DatasetDecoding = Field(default_factory=DatasetDecoding)
    synthetic_side: Literal["source", "target"] = Field(
        "target",
        description="where the translations go in the new dataset: `target` pairs each text with its translation "
        "(distillation: a teacher's outputs as targets); `source` pairs each translation with the text it was made "
        "from (back-translation: synthetic sources, real targets)",
    )
    tag: str | None = Field(
        None,
        min_length=1,
        max_length=20,
        pattern=r"^\S+$",
        description="with synthetic_side `source`: a word put before every synthetic source (tagged "
        "back-translation, Caswell et al. 2019), e.g. <BT>",
    )
    name: str | None = Field(None, min_length=1, max_length=200, description="the new dataset's; default from both")
    max_sentences: int | None = Field(None, ge=1, description="translate the first N rows only")
    backend: Backend = Field("auto", description=BACKEND_DESCRIPTION)
    target_language: Language | None = Field(
        None, description="a model of several pairs: the language to translate into, one of their targets"
    )
    source_language: Language | None = Field(
        None,
        description="a model of several pairs: the text's language (default the side's, where the model knows it), "
        "for zero_shot",
    )

    @model_validator(mode="after")
    def _tag_on_sources(self) -> DatasetTranslationCreate:
        if self.tag is not None and self.synthetic_side != "source":
            raise ValueError("tag marks synthetic sources: it needs synthetic_side 'source'")
        return self


class ReferenceScores(Output):
    """A parallel dataset's translations against the human side they stand beside: what a student learns from its
    teacher, or how far synthetic sources are from real ones, before any training."""

    pairs: int = Field(description="pairs scored: the first 100,000 with a non-empty reference")
    bleu: float = Field(description="corpus BLEU (sacrebleu, 13a tokens)")
    chrf: float = Field(description="corpus chrF")
    length_ratio: float = Field(description="the translations' length over the references' (BLEU's tokens)")


class DatasetTranslationPublic(Output):
    id: str
    model_id: str
    dataset_id: str = Field(description="the dataset translated")
    output_dataset_id: str | None = Field(
        None, description="the new parallel dataset, once succeeded (then parsed and reported on like an upload)"
    )
    status: DatasetTranslationStatus
    error: str | None
    settings: dict[str, Any]
    sentences: int = Field(description="rows to translate")
    translated: int = Field(description="rows done so far (kept across a worker's restart: the work resumes)")
    resumed_from: int = Field(description="rows already done when the running attempt started")
    attempt: int = Field(1, description="sends of its task (over 1: sent again after its worker died)")
    progress: float
    rate: float | None = Field(None, description="sentences a second of the running attempt")
    eta_seconds: float | None = Field(None, description="at that rate, while running")
    counts: dict[str, int] | None = Field(
        None, description="once succeeded: pairs written, and rows left out (empty, or too long for the model)"
    )
    reference_scores: ReferenceScores | None = Field(
        None,
        description="once succeeded, for a parallel dataset: the translations scored against its other side",
    )
    backend: AnsweringBackend | None = None
    target_language: str | None = Field(
        None, description="a model of several pairs: the language translated into (its token before each text)"
    )
    zero_shot: bool | None = Field(
        None, description="a model of several pairs: true when it never trained on the pair; null when unknown"
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
