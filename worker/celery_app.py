"""The workers' Celery app: `celery -A worker.celery_app worker -Q training -c 1`."""

from __future__ import annotations

import logging
import threading

import torch
from celery.signals import (
    setup_logging,
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from app import logs
from app.db import job_rows
from app.db.session import session_scope
from app.queueing import make_celery
from app.settings import get_settings
from worker import heartbeat, lease


@setup_logging.connect
def _configure_logging(loglevel: object = None, **_kwargs: object) -> None:
    """Celery leaves logging to us when this signal has a receiver: the service's JSON lines (app/logs.py), at
    the level given on the command line (`-l`), else LOG_LEVEL."""
    settings = get_settings()
    if isinstance(loglevel, int):
        loglevel = logging.getLevelName(loglevel)
    if isinstance(loglevel, str):
        settings = settings.model_copy(update={"log_level": loglevel.lower()})
    logs.configure(settings)


task_prerun.connect(logs.bind_task, weak=False)  # a task's lines carry its request, job or model id
task_postrun.connect(logs.unbind_task, weak=False)

app = make_celery("worker")
app.conf.include = ["worker.tasks.ping", "worker.tasks.training", "worker.tasks.inference"]


def set_torch_threads(**_kwargs) -> None:
    """On a shared CPU, fewer threads than cores is often much faster: TORCH_THREADS sets it per process."""
    if get_settings().torch_threads:
        torch.set_num_threads(get_settings().torch_threads)


set_torch_threads()
worker_process_init.connect(set_torch_threads)
# Pool processes (prefork) that get SIGTERM themselves checkpoint their training run instead of dying mid-step.
worker_process_init.connect(lambda **_kwargs: lease.mark_pool_process(), weak=False)


@worker_ready.connect
def _start_heartbeat(sender, **_kwargs) -> None:
    queues = sorted(q.name for q in sender.app.amqp.queues.consume_from.values())
    heartbeat.start(sender.app, sender.hostname, queues)


@worker_shutting_down.connect
def _drain(sender, sig=None, how=None, **_kwargs) -> None:
    """SIGTERM (a deploy, `docker stop`): Celery stops taking tasks and waits for running ones (a warm
    shutdown). Marking this worker draining makes its training jobs checkpoint their current step and go
    back to the queue within a few seconds, instead of training on until the end or until SIGKILL."""

    def mark() -> None:
        try:
            with session_scope() as session:
                job_rows.set_draining(session, str(sender))
            logging.getLogger(__name__).warning("%s: %s shutdown (%s); draining training jobs", sender, how, sig)
        except Exception:  # the database is away: leases will expire and the reaper re-queues the jobs
            logging.getLogger(__name__).exception("could not mark %s draining", sender)

    threading.Thread(target=mark, name="drain").start()  # not from inside the signal handler itself


@worker_shutdown.connect
def _stop_heartbeat(**_kwargs) -> None:
    heartbeat.stop()
