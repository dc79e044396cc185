"""What GET /v1/sweeps and GET /v1/sweeps/{id} show: the sweep's row, its trials as the study and their jobs know
them, and the best so far. Reading replays the study's journal and writes nothing (no lock is needed)."""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.tables import Job, Sweep, TrainedModel
from app.schemas.jobs import JobStatus
from app.schemas.sweeps import BestTrial, SweepBudget, SweepPublic, SweepStatus, TrialCurve, TrialPublic
from app.services import sweep_study
from app.services.sweep_runner import BEST_ALIAS, trial_jobs, worker_minutes


def _trial(trial: FrozenTrial, job: Job | None, model_id: str | None, direction: str) -> TrialPublic:
    points = sorted(trial.intermediate_values.items())
    values = [v for _, v in points]
    best = (max(values) if direction == "maximize" else min(values)) if values else None
    stop_reason = trial.user_attrs.get("stop_reason")
    status: Any = job.status if job is not None else "invalid"
    return TrialPublic(
        number=trial.number,
        job_id=job.id if job else None,
        status=status,
        params=dict(trial.params),
        given=bool(trial.user_attrs.get(sweep_study.GIVEN, False)),
        value=trial.value if trial.state == TrialState.COMPLETE else None,
        best_value=best,
        curve=TrialCurve(at=[at for at, _ in points], values=values),
        stop_reason=stop_reason if stop_reason is not None else (job.error if job and job.status == "failed" else None),
        model_id=model_id,
        worker_minutes=round(worker_minutes(job, utcnow()), 3) if job else None,
        started_at=job.started_at if job else None,
        finished_at=job.finished_at if job else None,
    )


def public(session: Session, sweep: Sweep, detail: bool = True) -> SweepPublic:
    study = sweep_study.load(session, sweep)
    jobs = trial_jobs(session, sweep.id)
    models = dict(
        session.execute(
            select(TrainedModel.job_id, TrainedModel.id).where(TrainedModel.job_id.in_([j.id for j in jobs.values()]))
        ).all()
    )
    frozen = study.get_trials(deepcopy=False)
    trials = [
        _trial(t, jobs.get(t.number), models.get(jobs[t.number].id) if t.number in jobs else None, sweep.direction)
        for t in frozen
    ]
    complete = [t for t in frozen if t.state == TrialState.COMPLETE]
    best = None
    if complete:
        top = study.best_trial
        job = jobs.get(top.number)
        model_id = sweep.best_model_id or (models.get(job.id) if job else None)
        registered = sweep.status == "succeeded" and sweep.best_model_id is not None and sweep.error is None
        best = BestTrial(
            number=top.number,
            job_id=job.id if job else None,
            value=cast(float, top.value),
            params=dict(top.params),
            model_id=model_id,
            model_ref=f"{sweep.name}@{BEST_ALIAS}" if registered else None,
        )
    now = utcnow()
    return SweepPublic(
        id=sweep.id,
        name=sweep.name,
        status=cast(SweepStatus, sweep.status),
        objective=cast(Any, sweep.objective),
        metric=cast(Any, sweep.metric),
        direction=cast(Any, sweep.direction),
        resource=cast(Any, sweep.resource),
        space=sweep.space,
        job=sweep.job_config,
        budget=SweepBudget.model_construct(minutes=sweep.budget_minutes, trials=sweep.budget_trials),
        max_concurrent_trials=sweep.max_concurrent,
        sampler=sweep.sampler,
        pruner=sweep.pruner,
        seed=sweep.seed,
        first_trials=sweep_study.first_trials(study) if detail else None,
        cancel_requested=sweep.cancel_requested,
        trial_counts=dict(Counter(cast(JobStatus | str, t.status) for t in trials)),
        worker_minutes=round(sum(worker_minutes(job, now) for job in jobs.values()), 3),
        best=best,
        importance=sweep.importance,
        stop_reason=sweep.stop_reason,
        error=sweep.error,
        trials=trials if detail else None,
        created_at=sweep.created_at,
        updated_at=sweep.updated_at,
        finished_at=sweep.finished_at,
    )
