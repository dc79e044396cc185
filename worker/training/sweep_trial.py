"""A training job that is a sweep's trial: its evaluations go to the sweep's study (whose pruner may stop it), and
its end moves the sweep on (app/services/sweep_runner.py)."""

from __future__ import annotations

import logging

from celery import current_app
from sqlalchemy import select

from app.core.settings import get_settings
from app.db.session import session_scope
from app.db.tables import Job
from app.services import sweep_runner
from app.services.queueing import dispatch_training
from worker.training.lease import RunState

log = logging.getLogger(__name__)


def report_to_sweep(state: RunState, job_id: str, step: int, metrics: dict[str, float]) -> None:
    """A trial's evaluation goes to its sweep's study; the pruner may stop it here. A failure to report is logged
    and training goes on: the trial is then judged by its end alone."""
    try:
        with session_scope() as session:
            reason = sweep_runner.report(session, job_id, step, state.train_seconds, metrics)
    except Exception:
        log.exception("job %s: its evaluation at step %d was not reported to its sweep", job_id, step)
        return
    if reason is not None:
        log.info("job %s: %s; stopping", job_id, reason)
        state.prune_reason = reason


def advance_sweep_of(job_id: str) -> None:
    """A trial that ended (or went back to the queue) moves its sweep on: the study hears how it ended and the
    next trials start. A failure here is logged; the reaper moves the sweep on later."""
    try:
        with session_scope() as session:
            sweep_id = session.scalar(select(Job.sweep_id).where(Job.id == job_id))
            started = sweep_runner.advance(session, get_settings(), sweep_id) if sweep_id else []
        for trial_job in started:
            dispatch_training(trial_job, current_app)
    except Exception:
        log.exception("job %s: its sweep was not moved on; the reaper will", job_id)
