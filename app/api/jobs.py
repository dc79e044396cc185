"""Training jobs: submit, list, read, label, cancel, metrics, checkpoints.

Comparing jobs is in job_comparison.py, their live events in job_events.py."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, BackgroundTasks, Header, Query, Request, Response, status
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, selectinload

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import bad_query, conflict, unprocessable
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import JobKey, TrainKey
from app.core.settings import get_settings
from app.db import metric_rows, node_rows
from app.db.job_rows import TERMINAL_STATES, request_cancel
from app.db.keys import Caller
from app.db.run_record_tables import JobCheckpoint, Metric
from app.db.tables import Dataset, Job, JobTag, TrainedModel
from app.db.worker_rows import live_workers, trains
from app.schemas.common import Page
from app.schemas.job_pairs import JobPairPublic
from app.schemas.jobs import (
    MAX_TAGS,
    AutoSettings,
    CheckpointPublic,
    JobCreate,
    JobPublic,
    JobStatus,
    JobUpdate,
    MetricPoint,
    MetricsPublic,
    ModelSpec,
    Objective,
    Progress,
    Series,
    Tag,
    TrainingSpec,
)
from app.services import job_submission, job_visibility, webhooks
from app.services.deletion import DATASET_FIELDS
from app.services.queueing import dispatch_training

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Not found"}}


def owned_job(session: Session, job_id: str, key: Caller) -> Job:
    """The job, if the key sees it (its organisation's; with scope train alone, one it submitted); 404 otherwise."""
    return job_visibility.visible_job(session, job_id, key)


TIME_BINDS_MARGIN = 1.25  # the steps' eta is an estimate: time binds only when clearly shorter than the steps' eta


def time_binds(job: Job, budget_seconds: float) -> bool:
    """Whether the time budget ends the run before max_steps does.

    The worker reports eta = min(steps left x seconds a step, budget - seconds spent), so the eta alone cannot tell
    which binds; the steps' eta at the current pace (tokens a step so far / tokens a second) can. Near the crossing
    both budgets give about the same fraction, so the margin costs nothing there.
    """
    if not budget_seconds or job.eta_seconds is None or job.step <= 0 or not job.tokens_per_second:
        return False
    steps_eta = (job.total_steps - job.step) * (job.tokens_seen / job.step) / job.tokens_per_second
    return steps_eta > TIME_BINDS_MARGIN * job.eta_seconds


def progress_of(job: Job) -> Progress:
    """The fraction done of whichever budget binds: steps, or training minutes (e.g. 12 of 20 min at step 86 of
    10,000,000)."""
    budget = 60 * (TrainingSpec.stored(job.training_config).max_minutes or 0)
    by_time = time_binds(job, budget)
    elapsed = budget - job.eta_seconds if by_time and job.eta_seconds is not None else None
    fraction = elapsed / budget if elapsed is not None else job.step / max(1, job.total_steps)
    if job.status == "succeeded":  # the budget that bound (steps, minutes, early stopping) is spent
        fraction = 1.0
    return Progress(
        step=job.step,
        total_steps=job.total_steps,
        fraction=min(1.0, max(0.0, fraction)),
        tokens_seen=job.tokens_seen,
        tokens_per_second=job.tokens_per_second,
        eta_seconds=job.eta_seconds,
        bound_by="time" if by_time else "steps",
        elapsed_seconds=elapsed,
        budget_seconds=budget or None,
    )


def waiting_for(session: Session, job: Job) -> str | None:
    """What a job waits for: a queued one, its datasets while a worker parses them, or the accelerator it asked for
    if no live training worker has that device; a running multi-host one, the hosts that have not joined it yet."""
    if job.status == "running":
        nodes = TrainingSpec.stored(job.training_config).nodes
        joined = len(node_rows.nodes(session, job.id, job.attempt)) if nodes > 1 else nodes
        return f"nodes: {joined} of {nodes} joined" if joined < nodes else None
    if job.status != "queued":
        return None
    ids = [i for i in (job.dataset_id, job.valid_dataset_id, job.mix_dataset_id) if i]
    ids += [row.dataset_id for row in job.pair_rows if row.dataset_id]
    parsing = session.scalars(select(Dataset.id).where(Dataset.id.in_(ids), Dataset.status == "processing")).all()
    if parsing:
        return f"dataset {', '.join(parsing)} to be parsed"
    accelerator = TrainingSpec.stored(job.training_config).accelerator
    if accelerator == "any":
        return None
    kind = "cuda" if accelerator == "gpu" else "cpu"
    workers = live_workers(session, get_settings().worker_heartbeat_seconds)
    if any(trains(w) and w.device_kind == kind for w in workers):
        return None
    return f"a {accelerator.upper()} worker"


def _pairs_public(session: Session, job: Job) -> list[JobPairPublic] | None:
    """A job of several pairs: each pair with its dataset's name (one query); None for a job of one pair."""
    if not job.pair_rows:
        return None
    ids = [p.dataset_id for p in job.pair_rows if p.dataset_id]
    names = dict(session.execute(select(Dataset.id, Dataset.name).where(Dataset.id.in_(ids))).tuples().all())
    return [
        JobPairPublic(
            dataset_id=p.dataset_id,
            dataset_name=names.get(p.dataset_id) if p.dataset_id else None,
            source_language=p.source_language,
            target_language=p.target_language,
        )
        for p in job.pair_rows
    ]


def job_public(session: Session, job: Job, detail: bool = True) -> JobPublic:
    model_id = session.scalar(select(TrainedModel.id).where(TrainedModel.job_id == job.id))
    latest = None
    if detail:
        latest = {name: MetricPoint(**point) for name, point in metric_rows.latest(session, job.id).items()}
    return JobPublic(
        id=job.id,
        name=job.name,
        tags=job.tags,
        note=job.note,
        source_language=job.source_language,
        target_language=job.target_language,
        objective=cast(Objective, job.objective),
        status=cast(JobStatus, job.status),
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        error=job.error,
        cancel_requested=job.cancel_requested,
        dataset_id=job.dataset_id,
        dataset_name=session.scalar(select(Dataset.name).where(Dataset.id == job.dataset_id))
        if job.dataset_id
        else None,
        valid_dataset_id=job.valid_dataset_id,
        test_dataset_id=job.test_dataset_id,
        init_model_id=job.init_model_id,
        mix_dataset_id=job.mix_dataset_id,
        mix_share=job.mix_share,
        pairs=_pairs_public(session, job),
        register_as=job.register_as,
        model=ModelSpec.stored(job.model_config),
        training=TrainingSpec.stored(job.training_config),
        progress=progress_of(job),
        latest_metrics=latest,
        model_id=model_id,
        auto_settings=None if job.auto_settings is None else AutoSettings.model_validate(job.auto_settings),
        device=job.device,
        waiting_for=waiting_for(session, job),
        sweep_id=job.sweep_id,
        trial_number=job.trial_number,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        updated_at=job.updated_at,
    )


def dispatch(job_id: str) -> None:
    """Send the job's id to the training queue; if the broker is down, the workers' reaper sends it later."""
    try:
        dispatch_training(job_id)
    except Exception as exc:
        log.warning(
            "job %s: its message could not be sent (%s: %s); a worker's reaper sends it",
            job_id,
            type(exc).__name__,
            exc,
        )


@router.post(
    "",
    response_model=JobPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        400: {"description": "Body is not UTF-8 JSON"},
        409: {"description": "Idempotency-Key reused with another body"},
        422: {"description": "Invalid job"},
    },
)
def create_job(
    body: JobCreate,
    session: SessionDep,
    settings: SettingsDep,
    key: TrainKey,
    response: Response,
    background: BackgroundTasks,
    request: Request,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> JobPublic:
    details = {"dataset_id": str(body.dataset_id), "objective": body.objective}
    audit.record(session, key, request, "job.submitted", "job", Job, details)  # written with the job, if it is new
    job, created = job_submission.create(session, settings, key, body, idempotency_key)
    if created:
        background.add_task(dispatch, job.id)  # after the commit, and after the response is sent
    else:
        response.headers["Idempotent-Replayed"] = "true"
    return job_public(session, job)


@router.get("", response_model=Page[JobPublic])
def list_jobs(
    session: SessionDep,
    key: JobKey,
    status_filter: Annotated[JobStatus | None, Query(alias="status")] = None,
    objective: Objective | None = None,
    tag: Annotated[list[Tag] | None, Query(description="repeatable: jobs carrying every tag given")] = None,
    sweep_id: Annotated[str | None, Query(max_length=36, description="the trials of this sweep")] = None,
    dataset_id: Annotated[
        str | None, Query(max_length=36, description="jobs that train, validate, test on or mix in this dataset")
    ] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[JobPublic]:
    query = job_visibility.visible_jobs(key).options(selectinload(Job.tag_rows), selectinload(Job.pair_rows))
    if dataset_id:
        named = (getattr(Job, field) == dataset_id for field in DATASET_FIELDS)
        query = query.where(or_(*named, Job.pair_rows.any(dataset_id=dataset_id)))
    if status_filter:
        query = query.where(Job.status == status_filter)
    if objective:
        query = query.where(Job.objective == objective)
    if sweep_id:
        query = query.where(Job.sweep_id == sweep_id)
    for wanted in tag or []:
        query = query.where(Job.tag_rows.any(JobTag.tag == wanted))
    return paginate(
        session,
        query,
        (Job.created_at.desc(), Job.id),
        limit,
        offset,
        lambda job: job_public(session, job, detail=False),
    )


@router.get("/{job_id}", response_model=JobPublic, responses=NOT_FOUND)
def read_job(job_id: str, session: SessionDep, key: JobKey) -> JobPublic:
    return job_public(session, owned_job(session, job_id, key))


@router.patch(
    "/{job_id}",
    response_model=JobPublic,
    responses={**NOT_FOUND, 400: {"description": "Body is not UTF-8 JSON"}, 422: {"description": "Invalid label"}},
)
def update_job(job_id: str, body: JobUpdate, session: SessionDep, key: TrainKey, request: Request) -> JobPublic:
    """Change a job's name, tags or note, whatever its status: only the fields given change. `add_tags` and
    `remove_tags` change the tags the job has when the request runs (the row is locked meanwhile, so two clients
    tagging the same job at once both see their change kept); `tags` replaces the list and goes with neither."""
    given = body.model_fields_set
    if "tags" in given and given & {"add_tags", "remove_tags"}:
        raise unprocessable("tags", "give tags (the whole list) or add_tags/remove_tags, not both")
    owned_job(session, job_id, key)
    job = session.scalars(select(Job).where(Job.id == job_id).with_for_update()).one()
    session.refresh(job)  # the tags as they are now that this request holds the row
    if "name" in given:
        job.name = body.name
    if "note" in given:
        job.note = body.note
    tags = (body.tags or []) if "tags" in given else None
    if given & {"add_tags", "remove_tags"}:
        removed = set(body.remove_tags or [])
        kept = [t for t in job.tags if t not in removed]
        tags = kept + [t for t in body.add_tags or [] if t not in kept]
        if len(tags) > MAX_TAGS:
            raise unprocessable("add_tags", f"the job would have {len(tags)} tags; at most {MAX_TAGS}")
    if tags is not None:
        job.tag_rows.clear()
        session.flush()  # the old rows go before the new ones come: a kept tag has the same primary key
        job.tag_rows.extend(job_submission.tag_rows(tags))
    audit.record(session, key, request, "job.labelled", "job", job.id, body.model_dump(mode="json", exclude_unset=True))
    session.commit()
    return job_public(session, job)


@router.post(
    "/{job_id}/cancel",
    response_model=JobPublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**NOT_FOUND, 409: {"description": "Job already finished"}},
)
def cancel_job(job_id: str, session: SessionDep, key: TrainKey, request: Request) -> JobPublic:
    job = owned_job(session, job_id, key)
    if job.status in TERMINAL_STATES:
        raise conflict(f"job {job_id} is already {job.status}")
    audit.record(session, key, request, "job.cancelled", "job", job.id, {"status": job.status})
    if request_cancel(session, job):  # a queued job: cancelled now (a running one by its worker, which reports it)
        webhooks.emit_job(session, job, job.status)
        session.commit()
    return job_public(session, job)


@router.get("/{job_id}/metrics", response_model=MetricsPublic, responses=NOT_FOUND)
def read_metrics(
    job_id: str,
    session: SessionDep,
    key: JobKey,
    names: Annotated[str | None, Query(description="comma-separated series names")] = None,
    since_step: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    until_step: Annotated[
        int | None, Query(ge=0, le=2**31 - 1, description="the last step read (a zoomed view)")
    ] = None,
    max_points: Annotated[int, Query(ge=2, le=20000)] = 1000,
    downsample: Annotated[
        Literal["mean", "extremes"],
        Query(description="a longer series keeps each bucket's mean, or its lowest and highest points (spikes)"),
    ] = "mean",
) -> MetricsPublic:
    owned_job(session, job_id, key)
    if until_step is not None and until_step < since_step:
        raise bad_query("until_step", f"until_step {until_step} is before since_step {since_step}")
    # Read first: a point recorded while the series are read may then be streamed twice, never missed.
    last_event_id = session.scalar(select(func.max(Metric.id)).where(Metric.job_id == job_id)) or 0
    out = {}
    for name, (steps, values) in metric_rows.series(
        session, job_id, (names or "").split(","), since_step, until_step
    ).items():
        reduce = metric_rows.downsample_extremes if downsample == "extremes" else metric_rows.downsample
        kept_steps, kept_values = reduce(steps, values, max_points)
        out[name] = Series(steps=kept_steps, values=kept_values, total_points=len(steps))
    return MetricsPublic(job_id=job_id, series=out, last_event_id=last_event_id)


@router.get("/{job_id}/checkpoints", response_model=list[CheckpointPublic], responses=NOT_FOUND)
def list_checkpoints(job_id: str, session: SessionDep, key: JobKey) -> list[CheckpointPublic]:
    owned_job(session, job_id, key)
    rows = session.scalars(select(JobCheckpoint).where(JobCheckpoint.job_id == job_id).order_by(JobCheckpoint.step))
    return [CheckpointPublic.model_validate(c) for c in rows]
