"""The workers' Celery app: `celery -A worker.celery_app worker -Q training -c 1`."""

from __future__ import annotations

import logging
import threading

import torch
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import (
    celeryd_after_setup,
    setup_logging,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)
from celery.worker import WorkController
from celery.worker.consumer import Consumer

from app.core import logs
from app.core.settings import get_settings
from app.core.task_names import (
    ACCELERATOR_QUEUES,
    DATA_QUEUE,
    INFERENCE_QUEUE,
    NODE_QUEUES,
    REQUEST_TASKS,
    TRAINING_QUEUE,
    WEBHOOK_QUEUE,
)
from app.db import job_rows
from app.db.session import session_scope
from app.services.queueing import make_celery
from worker import device, heartbeat, warm
from worker.training import job_log, lease

log = logging.getLogger(__name__)
# The signal handlers are connected by calls, not as decorators: celery ships no type information, and its
# decorators would leave the handlers untyped.


def _configure_logging(loglevel: object = None, **_kwargs: object) -> None:
    """Celery leaves logging to us when this signal has a receiver: the service's JSON lines (app/core/logs.py), at
    the level given on the command line (`-l`), else LOG_LEVEL; and the jobs' own logs (worker/training/job_log.py)."""
    settings = get_settings()
    if isinstance(loglevel, int):
        loglevel = logging.getLevelName(loglevel)
    if isinstance(loglevel, str):
        settings = settings.model_copy(update={"log_level": loglevel.lower()})
    logs.configure(settings)
    logs.quiet_task_lines(REQUEST_TASKS)  # no line a translation (each request logs in the API)
    job_log.install()  # what the training task logs about a job is also kept with it (GET /v1/jobs/{id}/logs)


setup_logging.connect(_configure_logging)
task_prerun.connect(logs.bind_task, weak=False)  # a task's lines carry its request, job or model id
task_postrun.connect(logs.unbind_task, weak=False)

app = make_celery("worker")
app.conf.include = [
    "worker.tasks.ping",
    "worker.tasks.training",
    "worker.tasks.training_node",
    "worker.tasks.inference",
    "worker.tasks.export",
    "worker.tasks.evaluation",
    "worker.tasks.model_import",
    "worker.tasks.dataset",
    "worker.tasks.file_translation",
    "worker.tasks.dataset_translation",
    "worker.tasks.webhook",
    "worker.tasks.collect",
]


def set_torch_threads(**_kwargs: object) -> None:
    """On a shared CPU, fewer threads than cores is often much faster: TORCH_THREADS sets it per process."""
    if get_settings().torch_threads:
        torch.set_num_threads(get_settings().torch_threads)


set_torch_threads()
worker_process_init.connect(set_torch_threads)


def _consume_the_device_queue(sender: str, instance: WorkController, **_kwargs: object) -> None:
    """A training worker also takes the jobs that asked for its kind of device, and the join tasks of multi-host jobs
    on workers of its kind (app/core/task_names.py)."""
    queues = instance.app.amqp.queues
    if TRAINING_QUEUE not in queues.consume_from:
        return
    try:
        kind = "gpu" if device.worker_device().type == "cuda" else "cpu"
    except device.DeviceError:
        return  # worker_init refuses to start it, naming the device
    queues.select_add(ACCELERATOR_QUEUES[kind])
    queues.select_add(NODE_QUEUES[kind])


celeryd_after_setup.connect(_consume_the_device_queue)


def _consume_the_side_queues(sender: str, instance: WorkController, **_kwargs: object) -> None:
    """An inference worker also takes datasets' processing and webhook deliveries (app/core/task_names.py)."""
    queues = instance.app.amqp.queues
    if INFERENCE_QUEUE in queues.consume_from:
        for queue in (DATA_QUEUE, WEBHOOK_QUEUE):
            queues.select_add(queue)


celeryd_after_setup.connect(_consume_the_side_queues)


def _check_device(**_kwargs: object) -> None:
    """Refuse to start on a host that lacks WORKER_DEVICE (SystemExit: Celery logs and swallows Exceptions)."""
    try:
        chosen = device.check_device()
    except device.DeviceError as exc:
        log.critical("worker not started: %s", exc)
        raise SystemExit(f"worker not started: {exc}") from exc
    log.info("worker device %s", chosen)


worker_init.connect(_check_device)
worker_process_init.connect(lambda **_kwargs: device.prepare_process(), weak=False)
# Pool processes (prefork) that get SIGTERM themselves checkpoint their training run instead of dying mid-step.
worker_process_init.connect(lambda **_kwargs: lease.mark_pool_process(), weak=False)


def _start_heartbeat(sender: Consumer, **_kwargs: object) -> None:
    """Once the worker is ready: its heartbeat, and on an inference worker the warm models (worker/warm.py), loaded
    in the background and reported by the heartbeat."""
    queues = sorted(q.name for q in sender.app.amqp.queues.consume_from.values())
    serving = None
    if INFERENCE_QUEUE in queues:
        warm.start(in_process=not _prefork(sender))
        serving = warm.report
    heartbeat.start(sender.app, sender.hostname, queues, serving)


def _prefork(sender: Consumer) -> bool:
    """Whether the worker's tasks run in pool processes of their own (prefork), not in this process's threads."""
    pool_cls = getattr(sender.controller, "pool_cls", None)
    return isinstance(pool_cls, type) and issubclass(pool_cls, PreforkPool)


worker_ready.connect(_start_heartbeat)


def _drain(sender: str, sig: str | None = None, how: str | None = None, **_kwargs: object) -> None:
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


worker_shutting_down.connect(_drain)


def _stop_heartbeat(**_kwargs: object) -> None:
    heartbeat.stop()


worker_shutdown.connect(_stop_heartbeat)
