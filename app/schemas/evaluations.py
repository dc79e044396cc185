"""Schemas of evaluations: a model scored on a parallel dataset (BLEU, chrF, chrF++ by sacrebleu)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from app.schemas.common import Input, Language, Output
from app.schemas.inference import BACKEND_DESCRIPTION, BEAM_DESCRIPTION, AnsweringBackend, Backend

# sacrebleu's BLEU tokenizers (sacrebleu.metrics.bleu.BLEU.TOKENIZERS). ja-mecab and ko-mecab need sacrebleu's
# extras (sacrebleu[ja], sacrebleu[ko]) on the inference workers, flores101 and flores200 their SentencePiece model
# in sacrebleu's folder there (workers download nothing): without them the evaluation fails before anything is
# translated, its error naming the tokenizer and what to install (worker/tasks/evaluation.py, metrics()).
BleuTokenize = Literal["13a", "intl", "zh", "char", "none", "ja-mecab", "ko-mecab", "flores101", "flores200"]
EvaluationStatus = Literal["queued", "running", "succeeded", "failed"]


class EvaluationCreate(Input):
    dataset_id: UUID = Field(
        strict=False, description="a parallel dataset of yours: its sources are translated, its targets the references"
    )
    beam_size: int | None = Field(None, ge=1, description=BEAM_DESCRIPTION)
    alpha: float = Field(0.6, ge=0, le=2, strict=False, description="GNMT length penalty exponent, as /translate")
    tokenize: BleuTokenize = Field("13a", description="sacrebleu's BLEU tokenizer: 13a (WMT), intl, zh, ja-mecab, ...")
    max_sentences: int | None = Field(None, ge=1, description="score the first N rows only")
    backend: Backend = Field(
        "auto", description=BACKEND_DESCRIPTION + "; compare scores of the same backend (the record's `backend`)"
    )
    glossary_id: str | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="a glossary of yours whose terms the hypotheses follow (as on /translate); `scores.glossary` "
        "counts the terms met and how each got in",
    )
    target_language: Language | None = Field(
        None,
        description="a model of several pairs: the language to translate into, one of their targets; left out, the "
        "dataset's declared pair when it is one of the model's",
    )
    source_language: Language | None = Field(
        None,
        description="a model of several pairs: the sources' language (default the dataset's declared one, where the "
        "model knows it), for zero_shot",
    )


class EvaluationPublic(Output):
    id: str
    model_id: str
    dataset_id: str | None
    job_id: str | None = None  # the training job that asked for it (training.test_dataset_id)
    status: EvaluationStatus
    error: str | None
    settings: dict[str, Any]
    sentences: int
    translated: int
    attempt: int = Field(1, description="sends of its task (over 1: sent again after its worker died)")
    progress: float
    # {"bleu": {"score", "signature"}, "chrf": {...}, "chrf++": {...}} once succeeded
    scores: dict[str, Any] | None
    # Which backend translated the test set, once succeeded (one backend for all its sentences); the one asked for
    # is settings.backend.
    backend: AnsweringBackend | None = None
    target_language: str | None = Field(
        None, description="a model of several pairs: the language translated into (its token before each source)"
    )
    zero_shot: bool | None = Field(
        None, description="a model of several pairs: true when it never trained on the pair; null when unknown"
    )
    hypotheses_url: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
