"""Scoring a model on a test set: the rules checked before queueing, where the hypotheses live, the dispatch.

POST /v1/models/{id}/evaluations and a training job's test_dataset_id both come here; an inference worker does
the work (worker/tasks/evaluation.py).
"""

from __future__ import annotations

from celery import Celery
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.core.task_names import EVALUATE
from app.db.background_tables import Evaluation
from app.db.tables import Dataset, TrainedModel
from app.schemas.evaluations import EvaluationCreate
from app.services import glossaries, inference_limits, target_languages
from app.services.datasets import require_ready
from app.services.errors import InvalidField
from app.services.queueing import dispatch_background


def evaluations_prefix(model_id: str) -> str:
    return f"evaluations/{model_id}"


def hypotheses_key(model_id: str, evaluation_id: str) -> str:
    """The hypotheses of an evaluation in the artifact store: one line per dataset row, in order."""
    return f"{evaluations_prefix(model_id)}/{evaluation_id}.txt"


def create(
    session: Session, settings: Settings, model: TrainedModel, body: EvaluationCreate, job_id: str | None = None
) -> Evaluation:
    """Insert a queued evaluation of `model` (the caller's) or raise InvalidField (422) naming the field."""
    if model.objective != "translation":
        raise InvalidField(
            "model_id", f"model {model.id} was trained for {model.objective}; only translation is scored"
        )
    # held until the evaluation commits, as a job holds its datasets (app/services/deletion.delete_dataset)
    dataset = session.get(Dataset, str(body.dataset_id), with_for_update={"read": True}, populate_existing=True)
    if dataset is None or dataset.owner_id != model.owner_id:
        raise InvalidField("dataset_id", f"dataset {body.dataset_id} not found")
    if dataset.kind != "parallel":
        raise InvalidField("dataset_id", f"dataset {body.dataset_id} is {dataset.kind}; a test set is parallel")
    require_ready(dataset, "dataset_id")
    if body.glossary_id is not None:  # 422 for another's or a pair not the model's; the worker reads it then
        glossaries.for_translation(
            session, model.owner_id, str(body.glossary_id), (model.source_language, model.target_language)
        )
    beam = inference_limits.beam_size(settings, body.beam_size, model.beam_size)
    body = body.model_copy(update={"beam_size": beam})  # recorded as decoded
    target = test_set_target(session, model, dataset, body)
    given = {"glossary_id"} if body.glossary_id else set()  # settings from before glossaries stay as they were
    left_out = {"dataset_id", "target_language", "source_language"} | ({"glossary_id"} - given)
    evaluation = Evaluation(
        owner_id=model.owner_id,
        model_id=model.id,
        dataset_id=dataset.id,
        job_id=job_id,
        settings=body.model_dump(mode="json", exclude=left_out),
        sentences=min(dataset.rows, body.max_sentences or dataset.rows),
        target_language=target.tag,
        zero_shot=target.zero_shot,
    )
    session.add(evaluation)
    session.commit()
    return evaluation


def test_set_target(
    session: Session, model: TrainedModel, dataset: Dataset, body: EvaluationCreate
) -> target_languages.Target:
    """The language the test set is translated into (target_languages.resolve, InvalidField naming the model's
    pairs). For a model of several pairs the request's target_language, else the dataset's declared target when its
    declared pair is one of the model's; its sources' language is the request's, else the dataset's declared one
    where the model knows that language (for zero_shot)."""
    pairs = target_languages.trained_pairs(model)
    target, source = body.target_language, body.source_language
    if pairs and target is None and (dataset.source_language, dataset.target_language) in pairs:
        target = dataset.target_language
    known = {language for pair in pairs for language in pair}
    if source is None and dataset.source_language in known and dataset.source_language != target:
        source = dataset.source_language
    languages = (model.source_language, model.target_language)
    return target_languages.resolve(model.id, pairs, languages, target, source)


def dispatch(evaluation_id: str, celery: Celery | None = None) -> None:
    dispatch_background(EVALUATE, Evaluation, evaluation_id, celery)
