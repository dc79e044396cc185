"""A job's row and datasets turned into training input: its stored sections read through the schema's types
(ModelSpec, TrainingSpec: model/train/settings.py declares the training fields once), then prepare() and TrainConfig.

The training task (worker/tasks/training.py) and every rank of a data-parallel group (worker/training/rank.py) read a
job through here. Nothing here names a training option: a new one reaches the trainer by its field alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select

from app.artifacts import ArtifactNotFound, get_store
from app.core.settings import get_settings
from app.db.session import session_scope
from app.db.tables import Dataset, Job, TrainedModel
from app.schemas.jobs import ModelSpec, TrainingSpec
from app.services.init_model import INIT_MODEL_MAY_CHANGE, INIT_MODEL_MAY_SHRINK
from model.data.batching import example_sizes
from model.data.language_pairs import LanguagePair, held_out_rows, rows_per_pair, tagged_rows
from model.data.mixing import mix
from model.data.text_rows import TextRows
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import load_model
from model.io.checkpoint_files import CheckpointError
from model.nn.transformer import Transformer
from model.train.config import TrainConfig, TrainingError
from model.train.prepare import PreparedData, prepare, start_from
from worker.data.source import rows

log = logging.getLogger(__name__)


@dataclass
class JobRows:
    """A job (detached from its session) and the rows of its datasets: (source, target) pairs or sentences, kept on
    disk as TextRows (model/data/text_rows.py) when read from a dataset."""

    job: Job
    train_rows: Sequence[Any]
    valid_rows: Sequence[Any] | None
    target_languages: tuple[str, ...] = ()  # a job of several pairs: its sources begin with one of their tokens
    valid_groups: tuple[str, ...] = ()  # and each validation row's pair ("en-fr"), validated pair by pair
    sampled_rows: dict[str, int] = field(default_factory=dict)  # and each pair's training rows in an epoch
    languages: int = 2  # and the distinct languages of its pairs, which share the vocabulary
    pair_sizes: tuple[int, ...] = ()  # and each pair's rows in train_rows (all once, pair after pair)


def read_rows(dataset: Dataset, reverse: bool = False) -> TextRows:
    """The dataset's rows, written a line at a time to a temporary file under DATA_DIR/tmp and mapped (a remote
    store's file or a registered URI's object is downloaded once into this host's cache first): a job holds the
    token ids it trains on, not its corpus's strings. A parallel dataset's pairs with an empty side are left out;
    `reverse` swaps their sides (training.reverse)."""
    directory = get_settings().data_dir / "tmp"
    directory.mkdir(parents=True, exist_ok=True)
    with rows(dataset) as numbered:
        if dataset.kind == "parallel":
            pairs = TextRows.write(
                (
                    (target, source) if reverse else (source, target)
                    for _, source, target in numbered
                    if source and target
                ),
                2,
                directory,
            )
            if dataset.rows and len(pairs) < dataset.rows:
                log.info("dataset %s: %d pairs with an empty side skipped", dataset.id, dataset.rows - len(pairs))
            if not pairs:
                raise TrainingError(f"dataset {dataset.id} has no pair with both sides")
            return pairs
        return TextRows.write((text for _, text in numbered), 1, directory)


def datasets_pending(job_id: str) -> list[str]:
    """The job's datasets a worker is still parsing (worker/data/ingest.py): the job waits for them."""
    with session_scope() as session:
        job = session.get(Job, job_id)
        ids = [i for i in (job.dataset_id, job.valid_dataset_id, job.mix_dataset_id) if i] if job is not None else []
        ids += [row.dataset_id for row in job.pair_rows if row.dataset_id] if job is not None else []
        return list(session.scalars(select(Dataset.id).where(Dataset.id.in_(ids), Dataset.status == "processing")))


def load_job(job_id: str) -> JobRows:
    """The job's row and its datasets' rows; TrainingError when the job or its training data is gone."""
    with session_scope() as session:
        job = session.get(Job, job_id)
        if job is None:
            raise TrainingError(f"job {job_id} no longer exists")
        pairs = [(row.dataset_id, LanguagePair(row.source_language, row.target_language)) for row in job.pair_rows]
        ids = [i for i in (job.dataset_id, job.valid_dataset_id, job.mix_dataset_id) if i]
        datasets = {
            d.id: d for d in session.scalars(select(Dataset).where(Dataset.id.in_(ids + [i for i, _ in pairs])))
        }
        session.expunge_all()
    if pairs:
        return pair_rows(job, pairs, datasets)
    if job.dataset_id not in datasets:
        raise TrainingError(f"dataset {job.dataset_id} no longer exists")
    for dataset in datasets.values():
        if dataset.status != "ready":  # failed (pending ones were waited for: datasets_pending)
            raise TrainingError(f"dataset {dataset.id} is {dataset.status}: {dataset.error or 'not parsed yet'}")
    if job.mix_dataset_id and job.mix_dataset_id not in datasets:
        raise TrainingError(f"dataset {job.mix_dataset_id} (mix_dataset_id) no longer exists")
    valid = datasets.get(job.valid_dataset_id) if job.valid_dataset_id else None
    reverse = TrainingSpec.stored(job.training_config).reverse
    train_rows = read_rows(datasets[job.dataset_id], reverse)
    rows = JobRows(job, train_rows, read_rows(valid, reverse) if valid is not None else None)
    if job.mix_dataset_id:
        rows = mixed_rows(rows, read_rows(datasets[job.mix_dataset_id], reverse))
    log.info(
        "job %s: read %d rows of dataset %s%s",
        job.id,
        len(rows.train_rows),
        job.dataset_id,
        f" and {len(rows.valid_rows)} validation rows of dataset {valid.id}" if valid and rows.valid_rows else "",
    )
    return rows


def pair_rows(job: Job, pairs: list[tuple[str | None, LanguagePair]], datasets: dict[str, Dataset]) -> JobRows:
    """A job of several pairs: each pair's validation rows held out of its own, and its training rows, every source
    tagged with its pair's target language (model/data/language_pairs.py), from which each epoch draws its rows by
    training.pair_temperature (prepare's pair_sizes)."""
    spec = TrainingSpec.stored(job.training_config)
    by_pair = []
    for dataset_id, pair in pairs:
        dataset = datasets.get(dataset_id) if dataset_id else None
        if dataset is None:
            raise TrainingError(f"dataset {dataset_id} of pair {pair.source}->{pair.target} no longer exists")
        if dataset.status != "ready":
            raise TrainingError(f"dataset {dataset.id} is {dataset.status}: {dataset.error or 'not parsed yet'}")
        by_pair.append(read_rows(dataset, spec.reverse))
    languages = [pair for _, pair in pairs]
    try:
        train, valid_by_pair = held_out_rows(by_pair, languages, spec.valid_fraction, spec.seed)
        rows = tagged_rows(train, languages)
    except ValueError as exc:
        raise TrainingError(str(exc)) from exc
    valid = [row for part in valid_by_pair for row in part]
    groups = tuple(str(pair) for pair, part in zip(languages, valid_by_pair, strict=True) for _ in part)
    shares = rows_per_pair([len(part) for part in train], spec.pair_temperature)  # as each epoch draws them
    counts = {f"{p.source}->{p.target}": n for p, n in zip(languages, shares, strict=True)}
    log.info("job %s: %d pairs, training rows by pair in an epoch (temperature %g): %s, drawn anew each epoch from "
             "%s; %d validation rows held out of them", job.id, len(pairs), spec.pair_temperature, counts,
             [len(part) for part in train], len(valid))  # fmt: skip
    sampled = {str(p): n for p, n in zip(languages, shares, strict=True)}
    spoken = len({code for pair in languages for code in (pair.source, pair.target)})
    targets = tuple(sorted({pair.target for pair in languages}))
    return JobRows(job, rows, valid, targets, groups, sampled, spoken, tuple(len(part) for part in train))


def load_init_model(model_id: str) -> tuple[Transformer, Tokenizer]:
    """The model a job starts from (its init_model_id), verified against its manifest; TrainingError if gone."""
    with session_scope() as session:
        row = session.get(TrainedModel, model_id)
        storage_key = row.storage_key if row is not None else None
    if storage_key is None:
        raise TrainingError(f"init model {model_id} no longer exists; submit the job again from another model")
    try:
        model, tokenizer, _ = load_model(get_store().fetch(storage_key), "cpu")
    except (ArtifactNotFound, CheckpointError) as exc:
        raise TrainingError(f"init model {model_id}: its files are missing or fail verification ({exc})") from exc
    return model, tokenizer


def prepare_job(rows: JobRows, tokenizer: Tokenizer | None = None, preset: str | None = None) -> PreparedData:
    """prepare() with the job's settings; tokenizer: a checkpoint's or rank 0's (None: train one, or the init
    model's); preset: instead of the job's (one of the candidates, while the worker chooses). A job with
    init_model_id starts from that model's weights (model.train.prepare.start_from)."""
    job = rows.job
    init = load_init_model(job.init_model_id) if job.init_model_id else None
    if init is not None and tokenizer is None:
        tokenizer = init[1]
    data = _prepare(rows, tokenizer, preset)
    source = (
        "the init model's"
        if init is not None and tokenizer is init[1]
        else "the checkpoint's"
        if tokenizer is not None
        else "trained on the training rows"
    )
    log_statistics(rows, data, source)
    if init is None:
        return data
    model = ModelSpec.stored(job.model_config)
    changes = {
        name: getattr(model, name)
        for name in (*INIT_MODEL_MAY_CHANGE, *INIT_MODEL_MAY_SHRINK)
        if getattr(model, name) is not None
    }  # layers as many as the init model's, or fewer: start_from keeps a subset of them
    return start_from(data, init[0], **changes)


def mixed_rows(rows: JobRows, old: TextRows) -> JobRows:
    """The job's training rows mixed among a sample of its mix dataset's (model/data/mixing.py); without validation
    rows, some of both held out, none of them a training row's repeat."""
    job, spec = rows.job, TrainingSpec.stored(rows.job.training_config)
    hold_out = spec.valid_fraction if rows.valid_rows is None else None
    try:
        mixed = mix(rows.train_rows, old, job.mix_share or 0.5, spec.seed, hold_out=hold_out)
    except ValueError as exc:
        raise TrainingError(f"mixing dataset {job.mix_dataset_id} in: {exc}") from exc
    log.info(
        "job %s: %d training rows, each %d times, mixed among %d rows of dataset %s (their share %.2f)%s",
        job.id,
        (len(mixed.train) - mixed.old_rows) // mixed.repeats,
        mixed.repeats,
        mixed.old_rows,
        job.mix_dataset_id,
        mixed.share,
        f"; {len(mixed.valid)} validation rows held out of both" if mixed.valid is not None else "",
    )
    return JobRows(job, mixed.train, mixed.valid if mixed.valid is not None else rows.valid_rows)


def log_statistics(rows: JobRows, data: PreparedData, tokenizer_source: str) -> None:
    """One line of what prepare() made of the rows: examples, what was dropped and why, tokenizer, lengths."""
    stats, spec = data.stats, TrainingSpec.stored(rows.job.training_config)
    train = data.train_examples(0) if callable(data.train_examples) else data.train_examples  # drawn each epoch
    sizes = np.concatenate((example_sizes(data.valid_examples), example_sizes(train)))
    held_out = "" if rows.valid_rows is not None else f", held out of the training rows ({spec.valid_fraction:g})"
    log.info(
        "job %s: %d training and %d validation examples%s; longer than max_length=%d tokens: %d training and %d "
        "validation rows dropped, %d truncated; tokenizer %s (%s), vocabulary %d; example length in tokens: "
        "mean %.1f, max %d",
        rows.job.id,
        stats["train_examples"],
        stats["valid_examples"],
        held_out,
        spec.max_length,
        stats["dropped"],
        stats["valid_dropped"],
        stats["truncated"],
        spec.tokenizer,
        tokenizer_source,
        stats["vocab_size"],
        float(sizes.mean()) if len(sizes) else 0.0,
        int(sizes.max(initial=0)),
    )
    dropped = dropped_line(rows.job.id, data.objective, stats, spec.max_length)
    if dropped is not None:
        log.warning("%s", dropped)


def dropped_line(job_id: str, objective: str, stats: dict[str, int], max_length: int) -> str | None:
    """The job's line of what prepare() dropped, how many and why (None: nothing was dropped)."""
    what = "sentence pairs" if objective == "translation" else "sentences"
    reasons = [
        (f"longer than max_length={max_length} tokens", stats.get("dropped", 0), stats.get("valid_dropped", 0)),
        ("empty once tokenized", stats.get("empty", 0), stats.get("valid_empty", 0)),
    ]
    counted = [(why, train, valid) for why, train, valid in reasons if train or valid]
    if not counted:
        return None
    total = sum(train + valid for _, train, valid in counted)
    parts = "; ".join(f"{train + valid} {why} ({train} training, {valid} validation)" for why, train, valid in counted)
    return f"job {job_id}: {total} {what} dropped, not trained or evaluated on: {parts}"


def _prepare(rows: JobRows, tokenizer: Tokenizer | None, preset: str | None = None) -> PreparedData:
    job = rows.job
    training, model = TrainingSpec.stored(job.training_config), ModelSpec.stored(job.model_config)
    return prepare(
        job.objective,
        rows.train_rows,
        rows.valid_rows,
        preset=preset or str(model.preset),
        model_overrides=model.overrides(),
        vocab_size=model.vocab_size,
        settings=training,
        seed=training.seed,
        tokenizer=tokenizer,
        target_languages=rows.target_languages,
        valid_groups=rows.valid_groups,
        pair_sizes=rows.pair_sizes,
        pair_temperature=training.pair_temperature,
    )


def train_config(job: Job, device: str) -> TrainConfig:
    """The job's TrainConfig on this device; a field the stored job lacks gets its default."""
    return TrainConfig.from_settings(TrainingSpec.stored(job.training_config), device=device)
