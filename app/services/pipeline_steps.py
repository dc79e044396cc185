"""A pipeline's steps: the plan of each kind, each step's state read from its object (a job, a dataset translation,
a filtered dataset), and how each step's object is made from the pipeline's settings and the earlier steps' outputs.

A step's object is an ordinary one: it is polled, cancelled and deleted by its own routes, and its own rules hold
(a job's quota, a dataset's checks). A translate or filter step succeeds once the dataset it made is parsed and
ready, so the next step never reads a dataset still processing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.db import task_rows
from app.db.base import Base
from app.db.dataset_translation_tables import DatasetTranslation
from app.db.job_rows import ACTIVE_STATES, CANCELLED, SUCCEEDED
from app.db.pipeline_tables import Pipeline
from app.db.tables import Dataset, Job, TrainedModel
from app.schemas.dataset_translations import DatasetTranslationCreate
from app.schemas.datasets import DatasetFilter
from app.schemas.jobs import JobCreate
from app.services import dataset_translations, datasets, job_submission
from app.services.errors import InvalidField, NotFound

TRAIN, TRANSLATE, FILTER = "train", "translate", "filter"
WAITING, RUNNING, FAILED = "waiting", "running", "failed"
TRANSLATED, TAUGHT = "back-translate", "teacher-translate"  # the translate step of each kind


def plan(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps of a pipeline with these (checked) settings, in order, none started."""
    if settings["kind"] == "backtranslation":
        steps = [] if settings.get("reverse_model_id") else [("reverse", TRAIN)]
        steps.append((TRANSLATED, TRANSLATE))
        if settings.get("cleaning"):
            steps.append(("clean", FILTER))
        steps.append(("train", TRAIN))
    else:
        steps = [(TAUGHT, TRANSLATE)]
        if settings.get("cleaning"):  # absent from a pipeline made before distillations were cleaned: none
            steps.append(("clean", FILTER))
        steps.append(("train-student", TRAIN))
    return [{"name": name, "kind": kind, "id": None, "earlier": []} for name, kind in steps]


@dataclass(frozen=True)
class StepState:
    status: str  # waiting | running | succeeded | failed | cancelled
    error: str | None = None
    output: dict[str, str] | None = None  # model_id (train), dataset_id (translate, filter)
    url: str | None = None


def _dataset_state(session: Session, dataset_id: str, url: str | None = None) -> StepState:
    dataset = session.get(Dataset, dataset_id)
    url = url or f"/v1/datasets/{dataset_id}"
    if dataset is None:
        return StepState(FAILED, f"dataset {dataset_id} was deleted", url=url)
    if dataset.status == "processing":
        return StepState(RUNNING, url=url)
    if dataset.status == "failed":
        return StepState(FAILED, f"dataset {dataset_id} failed: {dataset.error}", url=url)
    return StepState(SUCCEEDED, output={"dataset_id": dataset_id}, url=url)


def state(session: Session, step: dict[str, Any]) -> StepState:
    """What the step's object says of it now."""
    object_id = step["id"]
    if object_id is None:
        return StepState(WAITING)
    if step["kind"] == TRAIN:
        url = f"/v1/jobs/{object_id}"
        job = session.get(Job, object_id)
        if job is None:
            return StepState(FAILED, f"job {object_id} was deleted", url=url)
        if job.status in ACTIVE_STATES:
            return StepState(RUNNING, url=url)
        if job.status == CANCELLED:
            return StepState(CANCELLED, "the job was cancelled", url=url)
        if job.status != SUCCEEDED:
            return StepState(FAILED, f"job {object_id} {job.status}: {job.error}", url=url)
        model = session.scalar(select(TrainedModel.id).where(TrainedModel.job_id == job.id))
        if model is None:
            return StepState(FAILED, f"job {object_id} succeeded but its model is gone", url=url)
        return StepState(SUCCEEDED, output={"model_id": model}, url=url)
    if step["kind"] == TRANSLATE:
        translation = session.get(DatasetTranslation, object_id)
        if translation is None:
            return StepState(FAILED, f"dataset translation {object_id} was deleted")
        url = f"/v1/models/{translation.model_id}/dataset-translations/{object_id}"
        if translation.status in (task_rows.QUEUED, task_rows.RUNNING):
            return StepState(RUNNING, url=url)
        if translation.status == task_rows.FAILED:
            return StepState(FAILED, f"dataset translation {object_id} failed: {translation.error}", url=url)
        made = _dataset_state(session, translation.output_dataset_id)
        return StepState(made.status, made.error, made.output, url)
    return _dataset_state(session, object_id)


def _job_body(pipeline: Pipeline, field: str, fixed: dict[str, Any], given: dict[str, Any]) -> JobCreate:
    """A step's job: the settings the user gave for it under `field`, the step's own (`fixed`) over them; a
    combination JobCreate refuses is InvalidField naming the field."""
    training = {**given.get("training", {}), **fixed.pop("training", {})}
    body = {"objective": "translation", **fixed, "model": given.get("model", {}), "training": training}
    try:
        return JobCreate.model_validate(body, strict=False)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise InvalidField(f"{field}.{where}" if where else field, str(error["msg"])) from exc


def job_body(pipeline: Pipeline, step: str, outputs: dict[str, dict[str, str]]) -> JobCreate:
    """The job of a training step ("reverse", "train", "train-student"), from the settings and the earlier outputs
    (none yet while the pipeline is checked: the datasets the job will read are then the ones that exist)."""
    s = pipeline.settings
    languages = s.get("languages") or {}
    common = {"valid_dataset_id": s.get("valid_dataset_id"), "name": f"{pipeline.name}: {step}"}
    if step == "reverse":
        fixed = {
            **common, "dataset_id": s["dataset_id"], "training": {"reverse": True},
            "source_language": languages.get("target"), "target_language": languages.get("source"),
        }  # fmt: skip
        return _job_body(pipeline, "reverse_job", fixed, s.get("reverse_job", {}))
    synthetic = outputs.get("clean", outputs.get(TRANSLATED, outputs.get(TAUGHT, {})))
    fixed = {
        **common, "register_as": s.get("register_as"),
        "source_language": languages.get("source"), "target_language": languages.get("target"),
    }  # fmt: skip
    if s["kind"] == "backtranslation":
        fixed |= {
            "dataset_id": s["dataset_id"],
            "mix_dataset_id": synthetic.get("dataset_id"),
            "mix_share": s["real_share"],
        }
    else:
        fixed["dataset_id"] = synthetic.get("dataset_id", s["dataset_id"])
        if s.get("student_init") == "teacher":  # absent from a pipeline made before students could shrink: fresh
            fixed["init_model_id"] = s["teacher_model_id"]
        if s.get("original_share") and synthetic:
            fixed |= {"mix_dataset_id": s["dataset_id"], "mix_share": 1 - s["original_share"]}
    if fixed.get("mix_dataset_id") is None:  # while checking: the synthetic dataset is not made yet
        fixed.pop("mix_dataset_id", None)
        fixed.pop("mix_share", None)
    return _job_body(pipeline, "job", fixed, s.get("job", {}))


def start(
    session: Session, settings: Settings, pipeline: Pipeline, step: dict[str, Any], outputs: dict[str, dict[str, str]]
) -> Base:
    """The step's object, made and added to the session (the caller commits, then dispatches it). InvalidField or
    Conflict when it cannot be made; TooManyRequests when the owner's job quota is full (try later)."""
    s = pipeline.settings
    if step["kind"] == TRAIN:
        job = job_body(pipeline, step["name"], outputs)
        row: Base = job_submission.new_job(session, settings, pipeline.owner_id, job, key_id=pipeline.key_id)
    elif step["kind"] == TRANSLATE:
        backtranslating = s["kind"] == "backtranslation"
        model_id = s.get("reverse_model_id") or s.get("teacher_model_id") or outputs["reverse"]["model_id"]
        model = session.get(TrainedModel, model_id)
        if model is None:
            raise NotFound("model", model_id)
        request = DatasetTranslationCreate.model_validate(
            {
                "dataset_id": s["monolingual_dataset_id"] if backtranslating else s["dataset_id"],
                "decoding": s["decoding"],
                "synthetic_side": "source" if backtranslating else "target",
                "tag": s.get("tag") if backtranslating else None,
                "name": f"{pipeline.name}: {'synthetic' if backtranslating else 'distilled'} pairs",
                "max_sentences": s.get("max_sentences"),
                "target_language": s.get("translate_into"),  # a model of several pairs: the pipeline's direction
            },
            strict=False,
        )
        row = dataset_translations.new_translation(session, settings, model, request)
    else:
        translated, pairs = (TRANSLATED, "synthetic") if s["kind"] == "backtranslation" else (TAUGHT, "distilled")
        made = outputs[translated]["dataset_id"]
        parent = session.get(Dataset, made)
        if parent is None:
            raise NotFound("dataset", made)
        name = f"{pipeline.name}: {pairs} pairs, cleaned"
        rules = DatasetFilter.model_validate({"name": name, "rules": s["cleaning"]})
        row = datasets.new_filtered(session, parent, rules)
    session.add(row)
    session.flush()
    return row
