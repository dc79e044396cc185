"""Running a pipeline: `advance` is the one step that moves it on. It reads each step's state from its object
(app/services/pipeline_steps.py), starts the first step not yet started once the ones before it succeeded, fails the
pipeline with the error of a step that failed, and ends it when the last step succeeded (its model is the
pipeline's) or when a cancel was asked for (the running step is stopped: its job cancelled, its translation failed).

Whoever may have changed a pipeline calls `advance`: the API when it is created, cancelled or retried, and every
worker's reaper every few seconds (worker/reaper.py), which sees a step's end. It locks the pipeline's row (an
UPDATE), so callers take turns, and is idempotent: a second call with nothing new starts nothing. The object a step
starts commits with the step's record of it; the caller sends its message after the commit (`send`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from celery import Celery
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.core.task_names import FILTER_DATASET
from app.db import job_rows, task_rows
from app.db.base import utcnow
from app.db.dataset_translation_tables import DatasetTranslation
from app.db.pipeline_tables import Pipeline
from app.db.tables import Job, TrainedModel
from app.services import dataset_translations, datasets, pipeline_steps, webhooks
from app.services.errors import Conflict, InvalidField, NotFound, TooManyRequests
from app.services.queueing import dispatch_training

log = logging.getLogger(__name__)
RUNNING, SUCCEEDED, FAILED, CANCELLED = "running", "succeeded", "failed", "cancelled"


@dataclass(frozen=True)
class Started:
    kind: str  # a step kind: train, translate, filter
    id: str


def lock(session: Session, pipeline_id: str) -> Pipeline | None:
    """The pipeline, its row locked to this transaction (None if it is gone)."""
    session.execute(
        update(Pipeline).where(Pipeline.id == pipeline_id).values(version=Pipeline.version + 1, updated_at=utcnow())
    )
    return session.get(Pipeline, pipeline_id, populate_existing=True)


def _set_step(pipeline: Pipeline, index: int, **values: Any) -> None:
    steps = [dict(step) for step in pipeline.steps]  # a new list: the JSON column sees the change
    steps[index].update(values)
    pipeline.steps = steps


def _finish(session: Session, pipeline: Pipeline, status: str, error: str | None = None) -> None:
    """The pipeline ends with `status`; its webhook event commits with the change."""
    pipeline.status, pipeline.error, pipeline.finished_at = status, error, utcnow()
    log.info("pipeline %s %s%s", pipeline.id, status, f": {error}" if error else "")
    webhooks.emit_pipeline(session, pipeline)


def _stop_running(session: Session, pipeline: Pipeline) -> None:
    """Stop the steps still running: a job is cancelled (a running one by its worker), a translation failed (its
    worker stops after its chunk); a dataset being filtered is left to finish."""
    for step in pipeline.steps:
        if step["id"] is None:
            continue
        if step["kind"] == pipeline_steps.TRAIN:
            job = session.get(Job, step["id"])
            if job is not None and job.status in job_rows.ACTIVE_STATES and job_rows.request_cancel(session, job):
                webhooks.emit_job(session, job, job.status)  # queued: cancelled now (a running one by its worker)
                session.commit()
        elif step["kind"] == pipeline_steps.TRANSLATE:
            reason = f"cancelled with pipeline {pipeline.id}"
            task_rows.fail(session, DatasetTranslation, step["id"], reason)


def advance(session: Session, settings: Settings, pipeline_id: str) -> list[Started]:
    """Move the pipeline on (see the module's docstring) and commit; returns the objects it started, whose messages
    the caller sends (`send`)."""
    pipeline = lock(session, pipeline_id)
    if pipeline is None or pipeline.status != RUNNING:
        session.commit()
        return []
    if pipeline.cancel_requested:
        _finish(session, pipeline, CANCELLED)
        session.commit()
        _stop_running(session, pipeline)
        return []
    outputs: dict[str, dict[str, str]] = {}
    for index, step in enumerate(pipeline.steps):
        now = pipeline_steps.state(session, step)
        if now.status == SUCCEEDED:
            outputs[step["name"]] = now.output or {}
            continue
        if now.status in (FAILED, CANCELLED):
            _finish(session, pipeline, FAILED, f"step {index + 1} ({step['name']}) {now.status}: {now.error}")
        elif now.status == pipeline_steps.WAITING:
            try:
                row = pipeline_steps.start(session, settings, pipeline, step, outputs)
            except TooManyRequests:  # the owner's active jobs fill the quota: the next pass tries again
                session.rollback()
                return []
            except (InvalidField, Conflict, NotFound) as exc:
                session.rollback()
                pipeline = lock(session, pipeline_id)
                assert pipeline is not None  # locked a moment ago
                _finish(session, pipeline, FAILED, f"step {index + 1} ({step['name']}) could not start: {exc}")
                session.commit()
                return []
            _set_step(pipeline, index, id=row.id)  # type: ignore[attr-defined]  # every step's object has an id
            session.commit()
            log.info("pipeline %s: step %d (%s) is %s %s", pipeline.id, index + 1, step["name"], step["kind"], row.id)  # type: ignore[attr-defined]
            return [Started(step["kind"], row.id)]  # type: ignore[attr-defined]
        session.commit()
        return []
    pipeline.model_id = outputs.get(pipeline.steps[-1]["name"], {}).get("model_id")
    _serve_student(session, pipeline)
    _finish(session, pipeline, SUCCEEDED)
    session.commit()
    return []


def _serve_student(session: Session, pipeline: Pipeline) -> None:
    """A distillation's student_beam_size becomes its model's default beam (when the model is still there)."""
    beam = pipeline.settings.get("student_beam_size")
    model = session.get(TrainedModel, pipeline.model_id) if beam and pipeline.model_id else None
    if model is not None:
        model.beam_size = beam


def send(started: list[Started], celery: Celery | None = None) -> None:
    """Send the started objects' messages (after the commit). A broker away is logged: a job is sent again by the
    reaper, a dataset being filtered too; a dataset translation fails saying so (retry the pipeline)."""
    for item in started:
        try:
            if item.kind == pipeline_steps.TRAIN:
                dispatch_training(item.id, celery)
            elif item.kind == pipeline_steps.TRANSLATE:
                dataset_translations.dispatch(item.id, celery)
            else:
                datasets.dispatch(item.id, FILTER_DATASET)
        except Exception as exc:
            log.warning("pipeline step %s %s: its message could not be sent (%s)", item.kind, item.id, exc)


def cancel(session: Session, settings: Settings, pipeline: Pipeline) -> None:
    """Ask for the pipeline's end: advance() stops its running step and marks it cancelled. 409 once it is over."""
    if pipeline.status != RUNNING:
        raise Conflict(f"pipeline {pipeline.id} is {pipeline.status}: only a running pipeline can be cancelled")
    pipeline.cancel_requested = True
    session.commit()
    advance(session, settings, pipeline.id)


def retry(session: Session, settings: Settings, pipeline: Pipeline) -> list[Started]:
    """Run a failed pipeline again from its failed step (that step's object is made anew; the earlier steps'
    outputs stand). 409 unless it failed."""
    if pipeline.status != FAILED:
        raise Conflict(f"pipeline {pipeline.id} is {pipeline.status}: only a failed pipeline can be retried")
    for index, step in enumerate(pipeline.steps):
        if pipeline_steps.state(session, step).status in (FAILED, CANCELLED):
            _set_step(pipeline, index, id=None, earlier=[*step.get("earlier", []), step["id"]])
            break
    pipeline.status, pipeline.error, pipeline.finished_at = RUNNING, None, None
    session.commit()
    return advance(session, settings, pipeline.id)


def running_pipelines(session: Session) -> list[str]:
    return list(session.scalars(select(Pipeline.id).where(Pipeline.status == RUNNING)))
