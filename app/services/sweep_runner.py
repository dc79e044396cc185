"""Running a sweep: its trials are ordinary jobs, and `advance` is the one step that moves it on. It tells the
study how each finished trial ended, starts new trials while the budget and max_concurrent_trials allow, and,
once no trial runs and none may start, registers the best trial's model as name@best and ends the sweep.

Whoever may have changed a sweep calls `advance`: the API when it is created or cancelled, the training worker
when a trial ends, and every worker's reaper now and then (a lost call, a restart of everything). It takes the
sweep's lock (sweep_journal.lock), so callers take turns, and it is idempotent: a second call with nothing new
starts nothing. The trials it starts commit with the study's record of them; the caller sends their messages
after the commit (a message lost then is sent by the reaper, as for any job). The best model is registered as the
key that created the sweep, checked again at that moment (`registry.registering_caller`): a key revoked, expired
or no longer allowed models:write leaves it unregistered, and the sweep's error says why.

`report` is the trial's side: the worker calls it at each evaluation, and stops the trial as `pruned` when the
pruner says so.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime
from typing import Any

from optuna.trial import TrialState
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.db import metric_rows
from app.db.base import utcnow
from app.db.job_rows import ACTIVE_STATES, CANCELLED, FAILED, PRUNED, SUCCEEDED
from app.db.tables import Job, Sweep, TrainedModel
from app.schemas.jobs import TrainingSpec
from app.services import job_submission, registry, sweep_study
from app.services.errors import InvalidField, TooManyRequests
from app.services.sweep_journal import lock
from app.services.sweeps import trial_body

log = logging.getLogger(__name__)
RUNNING = "running"
BEST_ALIAS = "best"
FAILURES_IN_A_ROW = 5  # trials failing one after another: the space (or the data) is broken; stop spending


def trial_jobs(session: Session, sweep_id: str) -> dict[int, Job]:
    """The sweep's trials' jobs by trial number."""
    rows = session.scalars(select(Job).where(Job.sweep_id == sweep_id, Job.trial_number.is_not(None)))
    return {job.trial_number: job for job in rows if job.trial_number is not None}


def worker_minutes(job: Job, now: datetime) -> float:
    """Minutes of worker time a trial has taken: its run (first claim to end, or to now), times its processes
    (devices x nodes)."""
    if job.started_at is None:
        return 0.0
    end = job.finished_at or now
    spec = TrainingSpec.stored(job.training_config)
    return max(0.0, (end - job.started_at).total_seconds() / 60) * spec.devices * spec.nodes


def _committed_minutes(sweep: Sweep, jobs: list[Job], now: datetime) -> float:
    """Worker minutes spent, plus what the active trials may still take of their max_minutes."""
    total = 0.0
    for job in jobs:
        spent = worker_minutes(job, now)
        total += spent
        if job.status in ACTIVE_STATES:
            minutes = TrainingSpec.stored(job.training_config).max_minutes
            total += max(0.0, (minutes or 0) - spent)
    return total


def _objective_value(session: Session, sweep: Sweep, job: Job) -> float | None:
    """The objective of a succeeded trial: its model's (the checkpoint it published), else its last reported."""
    model = session.scalar(select(TrainedModel).where(TrainedModel.job_id == job.id))
    value = (model.metrics or {}).get(sweep.metric) if model is not None else None
    if value is None:
        latest = metric_rows.latest(session, job.id).get(sweep.metric)
        value = latest["value"] if latest else None
    return float(value) if value is not None and math.isfinite(value) else None


def _reconcile(session: Session, sweep: Sweep, study: Any, jobs: dict[int, Job]) -> None:
    """Tell the study how each trial whose job has ended ended (trials it already knows are left as they are)."""
    for number, job in sorted(jobs.items()):
        if job.status in ACTIVE_STATES or sweep_study.trial(study, number).state != TrialState.RUNNING:
            continue
        if job.status == SUCCEEDED:
            value = _objective_value(session, sweep, job)
            if value is None:
                sweep_study.tell(study, number, TrialState.FAIL, reason=f"its model recorded no {sweep.metric}")
            else:
                sweep_study.tell(study, number, TrialState.COMPLETE, value)
        elif job.status == PRUNED:
            sweep_study.tell(study, number, TrialState.PRUNED)
        else:
            reason = "cancelled" if job.status == CANCELLED else (job.error or "failed")
            sweep_study.tell(study, number, TrialState.FAIL, reason=reason)
        log.info("sweep %s: trial %d (job %s) %s", sweep.id, number, job.id, job.status)


def _why_no_more(sweep: Sweep, study: Any, jobs: list[Job], now: datetime) -> str | None:
    """Why no further trial may start (None: one may, when a slot is free)."""
    trials = study.get_trials(deepcopy=False)
    if sweep.cancel_requested:
        return "cancelled"
    if sweep.budget_trials is not None and len(trials) >= sweep.budget_trials:
        return f"the budget of {sweep.budget_trials} trials is spent"
    grid = sweep_study.grid_size(sweep.space) if sweep.sampler == "grid" else None
    if grid is not None and len(trials) >= grid:
        return f"every point of the grid ({grid}) was tried"
    if sweep.budget_minutes is not None:
        committed = _committed_minutes(sweep, jobs, now)
        if committed >= sweep.budget_minutes:
            return f"the budget of {sweep.budget_minutes:g} worker minutes is spent or committed ({committed:.1f})"
    finished = [t for t in trials if t.state.is_finished()]
    last = finished[-FAILURES_IN_A_ROW:]
    if len(last) == FAILURES_IN_A_ROW and all(t.state == TrialState.FAIL for t in last):
        reason = last[-1].user_attrs.get("stop_reason", "failed")
        return f"{FAILURES_IN_A_ROW} trials in a row failed; the last: {reason}"
    return None


def _free_slots(session: Session, settings: Settings, sweep: Sweep, jobs: list[Job]) -> int:
    """Trials that may start now: max_concurrent_trials less those active, within the owner's active-jobs quota."""
    free = sweep.max_concurrent - sum(job.status in ACTIVE_STATES for job in jobs)
    limit = settings.max_active_jobs_per_key
    if limit > 0:
        active = session.scalar(
            select(func.count()).select_from(Job).where(Job.owner_id == sweep.owner_id, Job.status.in_(ACTIVE_STATES))
        )
        free = min(free, limit - (active or 0))
    return max(0, free)


def _launch(session: Session, settings: Settings, sweep: Sweep, study: Any, jobs: dict[int, Job]) -> list[Job]:
    """Start trials while slots are free and the budget allows; a trial whose settings make no valid job (an
    architecture that does not fit memory, say) is recorded as failed, with why, and the next is asked for."""
    started: list[Job] = []
    now = utcnow()
    while _free_slots(session, settings, sweep, list(jobs.values())) > 0:
        if (reason := _why_no_more(sweep, study, list(jobs.values()), now)) is not None:
            sweep.stop_reason = reason
            break
        number, params = sweep_study.ask(study, sweep.space)
        try:
            body = trial_body(sweep, number, params)
            job = job_submission.new_job(
                session, settings, sweep.owner_id, body, sweep_id=sweep.id, trial_number=number, key_id=sweep.key_id
            )
        except InvalidField as exc:
            shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
            sweep_study.tell(study, number, TrialState.FAIL, reason=f"refused ({shown}): {exc.field}: {exc.message}")
            continue
        session.add(job)
        session.flush()
        jobs[number] = job
        started.append(job)
        log.info("sweep %s: trial %d is job %s (%s)", sweep.id, number, job.id, params)
    else:
        sweep.stop_reason = _why_no_more(sweep, study, list(jobs.values()), now)
    return started


def _register_best(session: Session, sweep: Sweep, job: Job) -> None:
    model = session.scalar(select(TrainedModel).where(TrainedModel.job_id == job.id))
    if model is None:
        return
    sweep.best_model_id = model.id
    if model.name not in (None, sweep.name):  # its owner registered it elsewhere meanwhile: leave it there
        sweep.error = f"the best model {model.id} is registered as {model.name}; {sweep.name}@best was not set"
        return
    caller = registry.registering_caller(session, sweep.owner_id, sweep.key_id, sweep.key_prefix, "created the sweep")
    if isinstance(caller, str):
        sweep.error = f"the best model {model.id} was not registered as {sweep.name}@{BEST_ALIAS}: {caller}"
        log.warning("sweep %s: %s", sweep.id, sweep.error)
        return
    registry.register(session, caller, model, sweep.name)
    registry.point_alias(session, caller, sweep.name, BEST_ALIAS, model)


def _finish(session: Session, sweep: Sweep, study: Any, jobs: dict[int, Job]) -> None:
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    best = study.best_trial if complete else None
    if best is not None:
        sweep.best_job_id = jobs[best.number].id
    if sweep.cancel_requested:
        sweep.status = CANCELLED
    elif best is not None:
        sweep.status = SUCCEEDED
        _register_best(session, sweep, jobs[best.number])
    else:
        sweep.status = FAILED
        sweep.error = f"no trial completed ({sweep.stop_reason or 'none started'})"
    sweep.finished_at = utcnow()
    log.info("sweep %s %s: %s", sweep.id, sweep.status, sweep.stop_reason)


def advance(session: Session, settings: Settings, sweep_id: str) -> list[str]:
    """Move the sweep on (see the module's docstring) and commit; returns the ids of the jobs it started, whose
    messages the caller sends."""
    sweep = lock(session, sweep_id)
    if sweep is None or sweep.status != RUNNING:
        session.commit()
        return []
    study = sweep_study.load(session, sweep)
    jobs = trial_jobs(session, sweep.id)
    _reconcile(session, sweep, study, jobs)
    try:
        started = [] if sweep.cancel_requested else _launch(session, settings, sweep, study, jobs)
    except TooManyRequests:  # the owner's quota filled meanwhile (and the transaction was rolled back): later
        return []
    if sweep.cancel_requested:
        sweep.stop_reason = "cancelled"
    if not any(job.status in ACTIVE_STATES for job in jobs.values()) and sweep.stop_reason is not None:
        _finish(session, sweep, study, jobs)
    sweep.importance = sweep_study.importance(study)
    session.commit()
    return [job.id for job in started]


def _last_rung(sweep: Sweep, job: Job) -> float:
    """Where a trial stops being prunable: its last ninth. Successive halving's next rung after a third of the budget
    is the budget itself, where the trial has finished training; pruned there, it would lose the value it earned."""
    training = TrainingSpec.stored(job.training_config)
    budget = (training.max_minutes or math.inf) * 60 if sweep.resource == "seconds" else training.max_steps
    return budget * (1 - sweep_study.FIRST_RUNG)


def report(session: Session, job_id: str, step: int, seconds: float, metrics: dict[str, float]) -> str | None:
    """A trial's evaluation at `step` after `seconds` of training: its objective goes to the study, and the answer
    is why the pruner stops it (None: go on, or not a trial). Commits."""
    job = session.get(Job, job_id)
    if job is None or job.sweep_id is None or job.trial_number is None:
        return None
    sweep = lock(session, job.sweep_id)
    value = metrics.get(sweep.metric) if sweep is not None else None
    if sweep is None or sweep.status != RUNNING or value is None or not math.isfinite(value):
        session.commit()
        return None
    at = int(seconds) if sweep.resource == "seconds" else step
    study = sweep_study.load(session, sweep)
    reason = None
    if sweep_study.report(study, job.trial_number, at, value, may_prune=at < _last_rung(sweep, job)):
        unit = "seconds of training" if sweep.resource == "seconds" else "steps"
        reason = (
            f"pruned by {sweep.pruner} after {at} {unit}: {sweep.metric} {value:.4g} is not among the best "
            f"{'third' if sweep.pruner == 'asha' else 'half'} of the trials that got as far"
        )
        sweep_study.set_stop_reason(study, job.trial_number, reason)
    session.commit()
    return reason


def running_sweeps(session: Session) -> list[str]:
    return list(session.scalars(select(Sweep.id).where(Sweep.status == RUNNING)))
