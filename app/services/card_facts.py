"""What a model's card says, read from the database into plain data (app/services/model_card.py writes the card).

card_facts gathers the model, the data it was trained on (names, ids, rows and sha256 of the files), its training
run, its validation metrics, its test-set scores and the model it started from, as they stand now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import task_rows
from app.db.background_tables import Evaluation
from app.db.tables import Dataset, Job, TrainedModel, Worker
from model.train.shrink import cut_from

CONFIG_SHOWN = ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "vocab_size", "max_positions")


@dataclass(frozen=True)
class DatasetFacts:
    role: str  # training, validation, test
    id: str
    name: str | None  # None: deleted since
    rows: int | None = None
    sha256: str | None = None
    languages: str | None = None  # "en → fr" as declared


@dataclass(frozen=True)
class ScoreFacts:
    dataset: DatasetFacts
    sentences: int
    beam_size: int | None
    scores: dict[str, dict[str, Any]]  # {"bleu": {"score", "signature"}, ...}
    finished_at: str | None


@dataclass(frozen=True)
class PairFacts:
    """A language pair of a model trained on several: its dataset and its own validation metrics."""

    source: str
    target: str
    dataset: DatasetFacts
    metrics: dict[str, float]  # {"bleu": 31.5, "chrf": ..., "valid_loss": ...} at the checkpoint kept


@dataclass(frozen=True)
class CardFacts:
    model_id: str
    title: str  # name vN, or the id
    description: str | None
    objective: str
    source_language: str | None
    target_language: str | None
    license: str | None
    beam_size: int | None  # its owner's default beam
    tags: list[str]
    parameters: int
    config: dict[str, Any]
    checkpoint: str  # which checkpoint: best@1200, average of 3
    sha256: str
    created_at: str
    metrics: dict[str, float]
    parent: dict[str, Any] | None  # {"id", "title" | None (deleted), "kept_layers": cut_from(...) | None}
    job: dict[str, Any] | None  # id, settings, device, worker, started_at, finished_at, seconds, step, tokens
    datasets: list[DatasetFacts] = field(default_factory=list)
    scores: list[ScoreFacts] = field(default_factory=list)
    pairs: list[PairFacts] = field(default_factory=list)  # a model of several pairs


def _title(model: TrainedModel) -> str:
    return f"{model.name} v{model.version}" if model.name else f"model {model.id}"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None


def _dataset(session: Session, role: str, dataset_id: str) -> DatasetFacts:
    row = session.get(Dataset, dataset_id)
    if row is None:
        return DatasetFacts(role, dataset_id, None)
    languages = f"{row.source_language} → {row.target_language}" if row.source_language else None
    return DatasetFacts(role, row.id, row.name, row.rows, row.sha256 or None, languages)


def _device(session: Session, job: Job) -> str | None:
    """The job's device, with its worker's accelerator name while that worker's row is kept (cuda (NVIDIA H100...))."""
    worker = session.get(Worker, job.worker) if job.worker else None
    name = worker.device_name if worker is not None else None
    return f"{job.device} ({name})" if job.device and name and name != job.device else job.device


def _job(session: Session, job: Job) -> dict[str, Any]:
    seconds = (job.finished_at - job.started_at).total_seconds() if job.started_at and job.finished_at else None
    return {
        "id": job.id,
        "name": job.name,
        "model_settings": job.model_config,
        "training_settings": job.training_config,
        "device": _device(session, job),
        "worker": job.worker,
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "seconds": round(seconds) if seconds is not None else None,
        "steps": job.step,
        "tokens_seen": job.tokens_seen,
    }


def card_facts(session: Session, model: TrainedModel) -> CardFacts:
    """Everything the card says about `model`, read now (datasets, parent and evaluations as they stand)."""
    job = session.get(Job, model.job_id) if model.job_id else None
    datasets: list[DatasetFacts] = []
    rows = [(p.source_language, p.target_language, p.dataset_id) for p in job.pair_rows] if job is not None else []
    rows = rows or [(source, target, None) for source, target in model.pairs or ()]  # its job deleted: the model's
    pairs = [
        PairFacts(
            source,
            target,
            _dataset(session, "training", dataset_id) if dataset_id else DatasetFacts("training", "", None),
            _pair_metrics(model.metrics, f"{source}-{target}"),
        )
        for source, target, dataset_id in rows
    ]
    datasets += [pair.dataset for pair in pairs] if job is not None else []
    if job is not None:
        for role, dataset_id in (
            ("training", None if pairs else job.dataset_id),
            ("validation", job.valid_dataset_id),
            ("test", job.test_dataset_id),
        ):
            if dataset_id:
                datasets.append(_dataset(session, role, dataset_id))
    parent = None
    if model.parent_model_id:
        parent_row = session.get(TrainedModel, model.parent_model_id)
        parent = {
            "id": model.parent_model_id,
            "title": _title(parent_row) if parent_row else None,
            "kept_layers": cut_from(parent_row.config, model.config) if parent_row else None,
        }
    evaluations = session.scalars(
        select(Evaluation)
        .where(Evaluation.model_id == model.id, Evaluation.status == task_rows.SUCCEEDED)
        .order_by(Evaluation.finished_at, Evaluation.id)
    )
    scores = [
        ScoreFacts(
            _dataset(session, "test", e.dataset_id) if e.dataset_id else DatasetFacts("test", "", None),
            e.sentences,
            e.settings.get("beam_size"),
            e.scores or {},
            _iso(e.finished_at),
        )
        for e in evaluations
    ]
    config = {name: model.config[name] for name in CONFIG_SHOWN if name in model.config}
    return CardFacts(
        model_id=model.id,
        title=_title(model),
        description=model.description,
        objective=model.objective,
        source_language=model.source_language,
        target_language=model.target_language,
        license=model.license,
        beam_size=model.beam_size,
        tags=list(model.tags),
        parameters=model.parameters,
        config=config,
        checkpoint=model.source,
        sha256=model.sha256,
        created_at=_iso(model.created_at) or "",
        metrics=dict(model.metrics),
        parent=parent,
        job=_job(session, job) if job is not None else None,
        datasets=datasets,
        scores=scores,
        pairs=pairs,
    )


def _pair_metrics(metrics: dict[str, float], pair: str) -> dict[str, float]:
    """One pair's validation metrics out of a model's ("bleu/en-fr" -> "bleu")."""
    suffix = f"/{pair}"
    return {name.removesuffix(suffix): value for name, value in metrics.items() if name.endswith(suffix)}
