"""A further host of a multi-host job (training.nodes > 1): node k of its data-parallel group.

Node 0, the worker that claimed the job (worker/training/group.py), sends one join task per other node to the queue of
its device kind. The task takes its node in the database (a second delivery finds it taken and leaves), fetches node
0's launch files and the job's checkpoints, and runs this host's elastic agent against node 0's rendezvous until the
group ends, relaying its ranks' output to the job's log. It writes nothing about the job's run (rank 0 does): when
its part of the group fails it records why on its node's row, for node 0 to name in the job's error, and it stops its
agent once the job's attempt is over.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import time
from pathlib import Path

from celery import Task, shared_task
from sqlalchemy.exc import SQLAlchemyError

from app.artifacts import get_store
from app.core.settings import get_settings
from app.core.task_names import JOIN_TRAINING
from app.db import node_rows
from app.db.session import session_scope
from app.schemas.jobs import TrainingSpec
from worker.device import check_gpus, worker_device
from worker.training import job_log
from worker.training.callbacks import checkpoint_key
from worker.training.group import Node, describe, launch_key, run_agent
from worker.training.job_data import load_job

log = logging.getLogger(__name__)
CHECK_SECONDS = 2.0  # how often the job's log is written and the attempt looked at


class _Follow:
    """The join task's watch over its agent: write the relayed lines to the job's log, and stop the agent once the
    job's attempt is over (done, cancelled, failed, or re-queued by the reaper)."""

    def __init__(self, job_id: str, attempt: int) -> None:
        self.job_id, self.attempt = job_id, attempt
        self.checked = time.monotonic()
        self.over = False

    def __call__(self) -> bool:
        if time.monotonic() - self.checked < CHECK_SECONDS:
            return False
        self.checked = time.monotonic()
        try:
            job_log.write(self.job_id)
            with session_scope() as session:
                self.over = not node_rows.still_running(session, self.job_id, self.attempt)
        except SQLAlchemyError as exc:  # a blip of the database: the group goes on; node 0 decides its fate
            log.warning("job %s: could not look at attempt %d (%s); looking again", self.job_id, self.attempt, exc)
        return self.over


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=JOIN_TRAINING, bind=True, ignore_result=True, acks_late=True, reject_on_worker_lost=True
)
def join_training(self: Task, job_id: str, attempt: int, node_rank: int, endpoint: str) -> None:
    worker = f"{self.request.hostname or 'worker'}/{os.getpid()}"
    with session_scope() as session:
        joined = node_rows.join(session, job_id, attempt, node_rank, worker)
    if not joined:
        log.info("job %s: node %d of attempt %d is taken, or the attempt is over", job_id, node_rank, attempt)
        job_log.discard(job_id)
        return
    job_log.begin(job_id, attempt)
    log.info("job %s: %s joins attempt %d as node %d (rendezvous at %s)", job_id, worker, attempt, node_rank, endpoint)
    error: str | None = None
    try:
        error = _run(job_id, attempt, node_rank, endpoint)
    except Exception as exc:
        log.exception("job %s: node %d failed", job_id, node_rank)
        error = f"{type(exc).__name__}: {exc}"
    finally:
        job_log.write(job_id, final=True)
        with session_scope() as session:
            node_rows.leave(session, job_id, attempt, node_rank, error)


def _run(job_id: str, attempt: int, node_rank: int, endpoint: str) -> str | None:
    """Run this host's share of the group; why it failed, or None."""
    settings, store = get_settings(), get_store()
    job = load_job(job_id).job
    spec = TrainingSpec.stored(job.training_config)
    check_gpus(str(worker_device()), spec.devices)
    launch = store.fetch(launch_key(job_id, attempt))
    with store.in_use(checkpoint_key(job_id)), tempfile.TemporaryDirectory(prefix=f"node-{job_id[:8]}-") as tmp:
        node = Node(
            job_id=job_id,
            attempt=attempt,
            worker=job.worker or "",
            node_rank=node_rank,
            nodes=spec.nodes,
            devices=spec.devices,
            endpoint=endpoint,
            max_restarts=spec.max_restarts,
            join_timeout=settings.job_nodes_timeout_seconds + 60,
            local_addr=settings.worker_rendezvous_host or socket.getfqdn(),
            launch=launch,
            workdir=Path(tmp),
            checkpoint_root=store.fetch(checkpoint_key(job_id), missing_ok=True),
        )
        follow = _Follow(job_id, attempt)
        outcome = run_agent(node, follow)
    if outcome.outcome == "succeeded" or follow.over:
        log.info("job %s: node %d left the group (%s)", job_id, node_rank, outcome.outcome)
        return None
    error = describe(node, outcome)
    log.error("job %s: node %d: %s", job_id, node_rank, error)
    return error
