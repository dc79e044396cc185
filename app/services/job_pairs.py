"""A job of several language pairs (`pairs`): each pair's dataset checked and its declared languages recorded.

One model learns every pair (model/data/language_pairs.py): a pair is known by its dataset's declared languages, so
a dataset without them, two datasets of one pair, or a dataset whose text the data report identifies as another
language than declared is refused (422 naming it) before the job is queued.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from app.db.tables import Dataset, JobPair, TrainedModel
from app.schemas.jobs import JobCreate
from app.services.errors import InvalidField
from app.services.target_languages import trained_pairs
from model.data.language_pairs import common_language

# Fields a job of several pairs does not take yet, and why.
NOT_WITH_PAIRS = {
    "valid_dataset_id": "each pair's validation rows are held out of its own rows (training.valid_fraction)",
    "test_dataset_id": "a test set of one pair is evaluated on the model once it is trained (POST "
    "/v1/models/{id}/evaluations)",
    "mix_dataset_id": "the pairs are already sampled together (training.pair_temperature)",
    "source_language": "each pair's languages are its dataset's",
    "target_language": "each pair's languages are its dataset's",
}
# The data report's detected language must hold this share of a side's identified rows for the side to count as
# another language than declared (model/data/report.py "detected").
MISMATCH_SHARE = 0.5

DatasetLoader = Callable[[Session, str, str, str, str], Dataset]


def pair_rows(session: Session, owner_id: str, body: JobCreate, dataset: DatasetLoader) -> list[JobPair]:
    """The job_pairs rows of `body.pairs` (none without them); `dataset` loads and checks one of the owner's datasets
    as the job's other dataset fields are (app/services/job_submission.py). InvalidField naming the first problem."""
    best_pair = body.training.best_pair
    if body.pairs is None:
        if best_pair is not None:
            raise InvalidField("training.best_pair", "best_pair names one of a job's pairs: give them in pairs")
        return []
    if body.objective != "translation":
        raise InvalidField("pairs", "pairs are language pairs of translation: a denoising job learns one language")
    for field, why in NOT_WITH_PAIRS.items():
        if getattr(body, field) is not None:
            raise InvalidField(field, f"{field} does not go with pairs: {why}")
    rows: list[JobPair] = []
    where: dict[str, int] = {}  # dataset id -> its position
    by_pair: dict[tuple[str, str], str] = {}  # (source, target) -> the dataset of that pair
    for position, pair in enumerate(body.pairs):
        field, dataset_id = f"pairs.{position}.dataset_id", str(pair.dataset_id)
        if dataset_id in where:
            raise InvalidField(field, f"dataset {dataset_id} is listed twice (pairs.{where[dataset_id]} too)")
        where[dataset_id] = position
        found = dataset(session, owner_id, dataset_id, field, "translation")
        source, target = _declared(found, field)
        if body.training.reverse:
            source, target = target, source
        if (source, target) in by_pair:
            raise InvalidField(
                field,
                f"datasets {by_pair[source, target]} and {dataset_id} are both {source}->{target}: a pair is one "
                "dataset (merge them into one first)",
            )
        by_pair[source, target] = dataset_id
        rows.append(JobPair(position=position, dataset_id=dataset_id, source_language=source, target_language=target))
    names = [f"{row.source_language}-{row.target_language}" for row in rows]  # as the worker names them
    if best_pair is not None and best_pair not in names:
        raise InvalidField("training.best_pair", f"best_pair={best_pair!r} is not one of the job's pairs {names}")
    return rows


def from_init_model(
    session: Session, owner_id: str, body: JobCreate, rows: list[JobPair], dataset: DatasetLoader
) -> list[JobPair]:
    """A job starting from a model of several pairs (`body` after app/services/init_model.inherit_model): its
    pairs' targets must be among the model's, whose tokens its tokenizer holds (a fine-tune cannot add one). A job of
    one dataset becomes a job of that one pair, so its sources are tagged as the model learnt them and its model
    keeps the convention; its pair is the request's languages, else its dataset's. `rows`: the job's own pairs
    (pair_rows). InvalidField naming the problem; the rows unchanged for a model of one pair or none."""
    parent = session.get(TrainedModel, body.init_model_id) if body.init_model_id else None
    if parent is None:
        return rows
    parent_pairs = trained_pairs(parent)
    if not parent_pairs:
        if rows:
            raise InvalidField(
                "init_model_id",
                f"model {body.init_model_id} was trained on one pair: it has no target-language tokens for pairs",
            )
        return rows
    targets = sorted({target for _, target in parent_pairs})
    trained = ", ".join(f"{s}->{t}" for s, t in parent_pairs)
    if not rows:
        for field, why in NOT_WITH_PAIRS.items():
            if field in ("valid_dataset_id", "test_dataset_id", "mix_dataset_id") and getattr(body, field) is not None:
                raise InvalidField(field, f"{field} does not go with a fine-tune of a model of several pairs: {why}")
        found = dataset(session, owner_id, str(body.dataset_id), "dataset_id", "translation")
        declared = (found.source_language, found.target_language)
        if body.training.reverse:
            declared = declared[::-1]
        source, target = body.source_language or declared[0], body.target_language or declared[1]
        if not source or not target:
            raise InvalidField(
                "target_language",
                f"model {parent.id} was trained on {trained}: name the pair this job fine-tunes with source_language "
                f"and target_language (one of {', '.join(targets)}), or declare its dataset's languages",
            )
        rows = [JobPair(position=0, dataset_id=str(body.dataset_id), source_language=source, target_language=target)]
    for row in rows:
        if row.target_language not in targets:
            field = f"pairs.{row.position}.dataset_id" if body.pairs else "target_language"
            raise InvalidField(
                field,
                f"model {parent.id} was trained on {trained}: it has no token for {row.target_language!r}, and a job "
                f"starting from it cannot add one (its targets: {', '.join(targets)})",
            )
    return rows


def _declared(dataset: Dataset, field: str) -> tuple[str, str]:
    missing = [side for side in ("source_language", "target_language") if not getattr(dataset, side)]
    if missing:
        raise InvalidField(
            field,
            f"dataset {dataset.id} declares no {' or '.join(missing)}: a job of several pairs knows each pair by its "
            "dataset's languages (given at upload)",
        )
    source, target = str(dataset.source_language), str(dataset.target_language)
    if source == target:
        raise InvalidField(field, f"dataset {dataset.id} is declared {source}->{target}: a pair needs two languages")
    for side, declared in (("source", source), ("target", target)):
        other = _identified_as(dataset.report, side, declared)
        if other is not None:
            raise InvalidField(
                field,
                f"dataset {dataset.id} is declared {source}->{target}, but its data report identifies "
                f"{other[1]:.0%} of its {side} sides as {other[0]!r}: upload it again with the right languages",
            )
    return source, target


def _identified_as(report: dict[str, Any] | None, side: str, declared: str) -> tuple[str, float] | None:
    """(language, share) where the report's most identified language of a side is not the declared one and holds
    at least MISMATCH_SHARE of it; None otherwise, or before the report (a dataset still parsed), or where the
    identifier does not know the declared language."""
    language = ((report or {}).get("sides", {}).get(side) or {}).get("language") or {}
    detected = language.get("detected") or []
    if not language.get("known") or not detected:
        return None
    top = detected[0]
    primary = declared.split("-")[0].lower()
    if top["language"] != primary and top.get("share", 0.0) >= MISMATCH_SHARE:
        return str(top["language"]), float(top["share"])
    return None


def common_source(rows: list[JobPair]) -> str | None:
    """The source language every pair shares (the job's own source_language), None where they differ or none."""
    return common_language(row.source_language for row in rows)


def common_target(rows: list[JobPair]) -> str | None:
    """The target language every pair shares (the job's own target_language), None where they differ or none."""
    return common_language(row.target_language for row in rows)
