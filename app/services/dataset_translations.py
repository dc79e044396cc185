"""Translating a dataset into a new parallel dataset: the rules checked before queueing, where its parts live, the
dispatch.

POST /v1/models/{id}/dataset-translations comes here; an inference worker does the work
(worker/tasks/dataset_translation.py) and makes the new dataset, which is then parsed and reported on like an upload.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.core.task_names import TRANSLATE_DATASET
from app.db.base import new_id
from app.db.dataset_translation_tables import DatasetTranslation
from app.db.tables import Dataset, TrainedModel
from app.schemas.dataset_translations import DatasetTranslationCreate
from app.services import target_languages
from app.services.datasets import require_ready
from app.services.errors import InvalidField
from app.services.file_translations import translations_prefix
from app.services.queueing import dispatch_background

MAJORITY = 0.5  # the share of a side's identified text one language must hold to be taken as the side's


def parts_prefix(model_id: str, translation_id: str) -> str:
    """Where the worker writes a translation's parts: under the model's translations, deleted with the model."""
    return f"{translations_prefix(model_id)}/datasets/{translation_id}"


def text_language(dataset: Dataset, side: str) -> tuple[str | None, str]:
    """The language of a dataset's side, and how it is known: as declared at upload, else the language most of its
    identified text is in by the data report's language identification; (None, "") when neither says."""
    declared = dataset.source_language if side in ("source", "text") else dataset.target_language
    if declared:
        return declared, "declared"
    report_side = ((dataset.report or {}).get("sides") or {}).get(side) or {}
    detected = (report_side.get("language") or {}).get("detected") or []
    if detected and detected[0].get("share", 0) >= MAJORITY:
        return str(detected[0]["language"]), f"identified in {detected[0]['share']:.0%} of its text"
    return None, ""


def same_language(a: str, b: str) -> bool:
    """Whether two BCP 47 tags name one language: their primary subtags agree (en and en-GB do)."""
    return a.split("-")[0].lower() == b.split("-")[0].lower()


def create(
    session: Session, settings: Settings, model: TrainedModel, body: DatasetTranslationCreate
) -> DatasetTranslation:
    """Insert a queued translation (new_translation) and commit."""
    translation = new_translation(session, settings, model, body)
    session.add(translation)
    session.commit()
    return translation


def new_translation(
    session: Session, settings: Settings, model: TrainedModel, body: DatasetTranslationCreate
) -> DatasetTranslation:
    """A queued translation of a dataset of the caller's by `model` (theirs), not yet added to the session (the
    dataset held until the caller commits); or InvalidField (422) naming the field: not a translation model, a
    dataset not ready or not theirs, a side a monolingual dataset does not have, a beam over MAX_BEAM_SIZE, text in
    another language than the model translates from."""
    if model.objective != "translation":
        raise InvalidField("model_id", f"model {model.id} was trained for {model.objective}, not translation")
    # held until the translation commits, as a job holds its datasets (app/services/deletion.delete_dataset)
    dataset = session.get(Dataset, str(body.dataset_id), with_for_update={"read": True}, populate_existing=True)
    if dataset is None or dataset.owner_id != model.owner_id:
        raise InvalidField("dataset_id", f"dataset {body.dataset_id} not found")
    require_ready(dataset, "dataset_id")
    side = body.side if dataset.kind == "parallel" else "text"
    if dataset.kind == "monolingual" and body.side != "source":
        raise InvalidField("side", f"dataset {dataset.id} is monolingual: it has one side, its text (side 'source')")
    decoding = body.decoding
    if decoding.method == "beam" and decoding.beam_size > settings.max_beam_size:
        raise InvalidField(
            "decoding.beam_size", f"beam_size={decoding.beam_size} exceeds MAX_BEAM_SIZE={settings.max_beam_size}"
        )
    language, known_by = text_language(dataset, side)
    target = _target(session, model, body, language, f"dataset {dataset.id}'s {side} is in {language} ({known_by})")
    # the new dataset declares what is declared: the side's language, else the model's; what was only identified
    # is checked above, never declared
    read = (dataset.source_language if side in ("source", "text") else dataset.target_language) or model.source_language
    made = target.tag or model.target_language
    languages = (
        {"source": read, "target": made} if body.synthetic_side == "target" else {"source": made, "target": read}
    )
    stored: dict[str, Any] = {
        "side": side,
        "decoding": decoding.settings(),
        "synthetic_side": body.synthetic_side,
        "name": body.name or f"{dataset.name} translated by {model.name or model.id[:8]}"[:200],
        "languages": languages,
        "backend": body.backend,
    }
    if body.tag is not None:
        stored["tag"] = body.tag
    if body.max_sentences is not None:
        stored["max_sentences"] = body.max_sentences
    return DatasetTranslation(
        id=new_id(),
        owner_id=model.owner_id,
        model_id=model.id,
        dataset_id=dataset.id,
        output_dataset_id=new_id(),
        settings=stored,
        sentences=min(dataset.rows, body.max_sentences or dataset.rows),
        target_language=target.tag,
        zero_shot=target.zero_shot,
    )


def _target(
    session: Session, model: TrainedModel, body: DatasetTranslationCreate, language: str | None, found: str
) -> target_languages.Target:
    """The language translated into (target_languages.resolve); InvalidField when the text's `language` (as
    `found` says it is known) is not one the model reads: its source, or for a model of several pairs any of their
    languages (zero-shot allowed), whose match is then the source_language unless the request gives one."""
    pairs = target_languages.trained_pairs(model)
    languages = (model.source_language, model.target_language)
    if not pairs:
        if language and model.source_language and not same_language(language, model.source_language):
            raise InvalidField("dataset_id", f"{found}; model {model.id} translates from {model.source_language}")
        return target_languages.resolve(model.id, pairs, languages, body.target_language, body.source_language)
    known = sorted({code for pair in pairs for code in pair})
    matching = [code for code in known if language and same_language(language, code)]
    if language and not matching:
        raise InvalidField("dataset_id", f"{found}; model {model.id} knows {', '.join(known)}")
    source = body.source_language or (matching[0] if matching and body.target_language != matching[0] else None)
    return target_languages.resolve(model.id, pairs, languages, body.target_language, source)


def dispatch(translation_id: str, celery: Celery | None = None) -> None:
    dispatch_background(TRANSLATE_DATASET, DatasetTranslation, translation_id, celery)
