"""The lease keeper: a thread beside a training run that renews the job's lease, writes its progress and
buffered metrics, and notices a cancel request or a lost lease, every couple of seconds. It also reads how much of
the organisation's worker minutes for the day are left (app/services/quotas.py): the run ends, as at the end of its
time budget, when they are spent.

Training steps only drop numbers into a `RunState`; the database is touched from this thread (and on
evaluations and checkpoints), so a fast step never waits on SQL and a slow evaluation never lets the lease
lapse.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import weakref
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from sqlalchemy import select

from app.core.settings import get_settings
from app.db import dynamics_rows, job_rows, metric_rows
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import Job
from app.services import quotas
from worker.training import job_log

log = logging.getLogger(__name__)
KEEPER_SECONDS = 2.0  # how often progress is written and cancel is noticed
MINUTES_SPENT = "the organisation's worker minutes for today (QUOTA_WORKER_MINUTES_PER_DAY) are spent"


@dataclass(eq=False)  # compared by identity, hashable for the registry below
class RunState:
    claim: job_rows.Claim
    progress: dict[str, Any] = field(default_factory=dict)
    pending: dict[int, dict[str, float]] = field(default_factory=dict)  # step -> {name: value}
    dynamics: list[dict[str, Any]] = field(default_factory=list)  # DynamicsRecord.to_json() of each record
    cancel_requested: bool = False
    preempt_requested: bool = False  # this worker is shutting down: checkpoint now and hand the job back
    lease_lost: bool = False
    # A sweep's trial that its pruner stopped at an evaluation: why (app/services/sweep_runner.report).
    prune_reason: str | None = None
    train_seconds: float = 0.0  # training seconds at the last step, summed over resumed attempts
    # When (time.monotonic()) the organisation's worker minutes for today run out; None: no limit (or not read yet).
    minutes_deadline: float | None = None
    minutes_stop: str | None = None  # why the run stopped for them, once it did
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_metrics(self, step: int, values: dict[str, float]) -> None:
        with self.lock:
            self.pending.setdefault(step, {}).update(values)

    def add_dynamics(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.dynamics.append(record)

    def set_progress(self, **values: Any) -> None:
        with self.lock:
            self.progress.update(values)

    @property
    def should_stop(self) -> bool:
        return self.cancel_requested or self.lease_lost or self.prune_reason is not None

    def out_of_minutes(self) -> bool:
        """Whether the organisation's worker minutes for today are spent, as last read."""
        return self.minutes_deadline is not None and time.monotonic() >= self.minutes_deadline

    def minutes_spent(self) -> bool:
        """out_of_minutes, for the trainer (polled once per step): says so in the job's log the first time."""
        if not self.out_of_minutes():
            return False
        if self.minutes_stop is None:
            self.minutes_stop = MINUTES_SPENT
            log.warning(
                "job %s: %s: the run ends here, as at the end of its time budget, keeping what it trained; "
                "the minutes start again at midnight UTC",
                self.claim.job_id,
                self.minutes_stop,
            )
        return True


def read_minutes_left(state: RunState) -> None:
    """Set state.minutes_deadline from the minutes the job's organisation has left today, shared by the devices its
    running jobs hold; in a transaction of its own that never raises (the last deadline read stands)."""
    try:
        with session_scope() as session:
            owner_id = session.scalar(select(Job.owner_id).where(Job.id == state.claim.job_id))
            if owner_id is None:
                return
            left = quotas.running_seconds_left(session, get_settings(), owner_id, utcnow())
        state.minutes_deadline = None if left is None else time.monotonic() + left
    except Exception:
        log.exception("job %s: could not read the organisation's worker minutes left", state.claim.job_id)


# Runs in this process, for the SIGTERM handler of pool processes.
_RUNS: weakref.WeakSet[RunState] = weakref.WeakSet()
_pool_process = False
_previous_handler: Any = None


def mark_pool_process() -> None:
    """Called in each prefork pool process: there a SIGTERM during a run means 'checkpoint and hand back'.
    (In the main process Celery owns SIGTERM: a warm shutdown marks the worker draining, see celery_app.)"""
    global _pool_process
    _pool_process = True


def track(state: RunState) -> None:
    """Register a run; in a pool process, take over SIGTERM until the last run ends (billiard's own handler
    would raise SystemExit in the middle of a step)."""
    global _previous_handler
    _RUNS.add(state)
    if (
        _pool_process
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is not _on_sigterm
    ):
        _previous_handler = signal.signal(signal.SIGTERM, _on_sigterm)


def untrack(state: RunState) -> None:
    global _previous_handler
    _RUNS.discard(state)
    if not _RUNS and _previous_handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _previous_handler)
        _previous_handler = None


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM sent to a pool process itself (systemd's control group, a kill of the whole process group): the
    training run checkpoints and hands its job back; the process then ends when its main process tells it."""
    runs = [s for s in list(_RUNS) if not s.lease_lost]
    for state in runs:
        state.preempt_requested = True
    if not runs and callable(_previous_handler):
        _previous_handler(signum, frame)


def flush(state: RunState, lease_seconds: int) -> None:
    """Write buffered metrics, dynamics and progress and renew the lease, in one transaction per call; then the
    job's waiting log lines (worker/training/job_log.py), in a transaction of their own that never raises."""
    with state.lock:
        pending, state.pending = state.pending, {}
        dynamics, state.dynamics = state.dynamics, []
        progress = dict(state.progress)
    try:
        with session_scope() as session:
            lease = job_rows.renew(session, state.claim, lease_seconds, **progress)
            if lease.held:  # a worker that lost the job writes nothing more for it
                for step, values in sorted(pending.items()):
                    metric_rows.record(session, state.claim.job_id, step, values)
                dynamics_rows.record(session, state.claim.job_id, dynamics)
    except Exception:
        with state.lock:  # keep the points for the next try; newer values for the same step win
            state.dynamics[:0] = dynamics
            for step, values in pending.items():
                state.pending[step] = {**values, **state.pending.get(step, {})}
        raise
    if not lease.held:
        state.lease_lost = True
        log.warning(
            "job %s: lease lost (attempt %d); stopping without writing more", state.claim.job_id, state.claim.attempt
        )
    state.cancel_requested = lease.cancel_requested
    state.preempt_requested = state.preempt_requested or lease.preempt_requested
    if lease.held:
        job_log.write(state.claim.job_id)
        read_minutes_left(state)


class LeaseKeeper(threading.Thread):
    def __init__(self, state: RunState, lease_seconds: int, every: float) -> None:
        super().__init__(name=f"lease-{state.claim.job_id[:8]}", daemon=True)
        self.state, self.lease_seconds, self.every = state, lease_seconds, every
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.every):
            try:
                flush(self.state, self.lease_seconds)
            except Exception:  # the database may be briefly away; the lease outlives a few misses
                log.exception("job %s: could not renew the lease", self.state.claim.job_id)
            if self.state.lease_lost:
                return

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)
