"""Pipelines: back-translation and distillation as chains of ordinary jobs, dataset translations and filtered
datasets. Start one, list them, read one with its steps, cancel one (its running step stops), retry a failed one
from the step that failed, delete a finished one (its jobs, datasets and models stay)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Body, Query, Request, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import conflict, not_found
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import ReadKey, TrainKey
from app.db.pipeline_tables import Pipeline
from app.schemas.common import Page
from app.schemas.pipelines import PipelineCreate, PipelinePublic, PipelineStatus
from app.services import pipeline_runner, pipelines

router = APIRouter(prefix="/v1/pipelines", tags=["pipelines"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Not found"}}


def owned_pipeline(session: Session, pipeline_id: str, owner_id: str) -> Pipeline:
    pipeline = session.get(Pipeline, pipeline_id)
    if pipeline is None or pipeline.owner_id != owner_id:
        raise not_found("pipeline", pipeline_id)
    return pipeline


@router.post(
    "",
    response_model=PipelinePublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        400: {"description": "Body is not UTF-8 JSON"},
        403: {"description": "register_as without scope models:write"},
        422: {
            "description": "A dataset or model that is not yours, not found, of the wrong kind or in the wrong "
            "language; a step's job settings the job schema refuses; settings out of range"
        },
    },
)
def create_pipeline(
    body: Annotated[PipelineCreate, Body()],
    session: SessionDep,
    settings: SettingsDep,
    key: TrainKey,
    background: BackgroundTasks,
    request: Request,
) -> PipelinePublic:
    """Start a pipeline: `backtranslation` (a reverse model, given or trained first, translates target-language
    text into tagged synthetic sources; they are cleaned; the forward model trains on the real pairs mixed among
    them) or `distillation` (a teacher translates the training sources; a student learns from them). Its first
    step starts at once; each step is an ordinary job, dataset translation or dataset, polled by its own route."""
    audit.record(
        session, key, request, "pipeline.created", "pipeline", Pipeline, {"kind": body.kind, "name": body.name}
    )
    pipeline = pipelines.create(session, settings, key, body)
    session.commit()
    started = pipeline_runner.advance(session, settings, pipeline.id)
    background.add_task(pipeline_runner.send, started)  # after the commit, and after the response is sent
    session.refresh(pipeline)
    return pipelines.public(session, pipeline)


@router.get("", response_model=Page[PipelinePublic])
def list_pipelines(
    session: SessionDep,
    key: ReadKey,
    status_filter: Annotated[PipelineStatus | None, Query(alias="status")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[PipelinePublic]:
    query = select(Pipeline).where(Pipeline.owner_id == key.owner_id)
    if status_filter:
        query = query.where(Pipeline.status == status_filter)
    return paginate(
        session, query, (Pipeline.created_at.desc(), Pipeline.id), limit, offset, lambda p: pipelines.public(session, p)
    )


@router.get("/{pipeline_id}", response_model=PipelinePublic, responses=NOT_FOUND)
def read_pipeline(pipeline_id: str, session: SessionDep, key: ReadKey) -> PipelinePublic:
    return pipelines.public(session, owned_pipeline(session, pipeline_id, key.owner_id))


@router.post(
    "/{pipeline_id}/cancel",
    response_model=PipelinePublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**NOT_FOUND, 409: {"description": "Pipeline already over"}},
)
def cancel_pipeline(
    pipeline_id: str, session: SessionDep, settings: SettingsDep, key: TrainKey, request: Request
) -> PipelinePublic:
    """No further step starts; the running one stops (a queued job is cancelled at once, a running one at its next
    lease renewal; a dataset translation after its chunk; a dataset being filtered finishes)."""
    pipeline = owned_pipeline(session, pipeline_id, key.owner_id)
    if pipeline.status != pipeline_runner.RUNNING:
        raise conflict(f"pipeline {pipeline_id} is {pipeline.status}: only a running pipeline can be cancelled")
    audit.record(session, key, request, "pipeline.cancelled", "pipeline", pipeline_id, {"name": pipeline.name})
    pipeline_runner.cancel(session, settings, pipeline)
    session.refresh(pipeline)
    return pipelines.public(session, pipeline)


@router.post(
    "/{pipeline_id}/retry",
    response_model=PipelinePublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**NOT_FOUND, 409: {"description": "Pipeline not failed"}},
)
def retry_pipeline(
    pipeline_id: str,
    session: SessionDep,
    settings: SettingsDep,
    key: TrainKey,
    background: BackgroundTasks,
    request: Request,
) -> PipelinePublic:
    """Run a failed pipeline again from the step that failed: that step's job, translation or dataset is made
    anew (the failed one's id stays in the step's `earlier`); the steps before it keep what they made."""
    pipeline = owned_pipeline(session, pipeline_id, key.owner_id)
    if pipeline.status != pipeline_runner.FAILED:
        raise conflict(f"pipeline {pipeline_id} is {pipeline.status}: only a failed pipeline can be retried")
    audit.record(session, key, request, "pipeline.retried", "pipeline", pipeline_id, {"name": pipeline.name})
    started = pipeline_runner.retry(session, settings, pipeline)
    background.add_task(pipeline_runner.send, started)
    session.refresh(pipeline)
    return pipelines.public(session, pipeline)


@router.delete(
    "/{pipeline_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={**NOT_FOUND, 409: {"description": "Still running: cancel it first"}},
)
def delete_pipeline(pipeline_id: str, session: SessionDep, key: TrainKey, request: Request) -> Response:
    """Delete a pipeline that is over; the jobs, datasets and models its steps made stay (delete each by its own
    route, under its own rules)."""
    pipeline = owned_pipeline(session, pipeline_id, key.owner_id)
    if pipeline.status == pipeline_runner.RUNNING:
        raise conflict(f"pipeline {pipeline_id} is running: cancel it first (POST /v1/pipelines/{pipeline_id}/cancel)")
    audit.record(session, key, request, "pipeline.deleted", "pipeline", pipeline_id, {"name": pipeline.name})
    session.delete(pipeline)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
