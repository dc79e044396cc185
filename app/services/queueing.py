"""The one Celery configuration, shared by the API (which only sends) and the workers."""

from __future__ import annotations

import threading
import time
from functools import lru_cache
from typing import Any

from celery import Celery
from celery.signals import before_task_publish
from kombu.entity import Exchange, Queue  # kombu/__init__ re-exports them lazily, invisibly to mypy

from app.core import logs
from app.core.settings import Settings, get_settings
from app.core.task_names import ACCELERATOR_QUEUES, INFERENCE_QUEUE, QUEUES, TRAIN
from app.db import task_rows
from app.db.job_rows import mark_dispatched
from app.db.session import session_scope
from app.db.tables import Job
from app.schemas.jobs import TrainingSpec
from app.services import broker_wake, result_files

# The embedded broker (an sqla+ URL) wakes its consumers when a message is sent (app/services/broker_wake.py).
broker_wake.install()
# A task sent while handling a request carries the request's id (its lines in the worker carry it too).
before_task_publish.connect(logs.publish_request_id, weak=False)


def broker_transport_options(settings: Settings) -> dict[str, Any]:
    if settings.embedded_broker:
        # Passed to SQLAlchemy's create_engine by kombu: wait for SQLite's lock instead of failing.
        return {"connect_args": {"timeout": 30}}
    return {
        "visibility_timeout": settings.broker_visibility_timeout,
        "socket_timeout": 5,
        "socket_connect_timeout": 5,
    }


def celery_config(settings: Settings) -> dict[str, Any]:
    """Settings for long, redeliverable tasks: late acks, prefetch 1, JSON only, explicit limits."""
    return {
        "broker_url": settings.celery_broker_url,
        "broker_transport_options": broker_transport_options(settings),
        "broker_connection_retry_on_startup": True,
        # Only inference answers use the result backend; jobs and their results live in the database.
        "result_backend": result_files.celery_url(settings.celery_result_backend),
        "result_expires": 3600,
        "result_extended": False,
        "task_ignore_result": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # Each queue on its own direct exchange and key (a bare Queue(name) would be bound to the default queue's).
        "task_queues": [
            # kombu's Queue and Exchange have no type hints
            Queue(name, Exchange(name, type="direct"), routing_key=name)
            for name in QUEUES
        ],
        "task_default_queue": INFERENCE_QUEUE,
        "task_create_missing_queues": False,
        "task_publish_retry": True,
        "task_publish_retry_policy": {"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1},
        "worker_hijack_root_logger": False,
        "worker_send_task_events": True,  # for Flower (inference tasks opt out: worker/tasks/inference.py)
        # No task-sent events: one more broker write per request, and Flower learns of a task from its worker.
        "task_send_sent_event": False,
        "timezone": "UTC",
    }


def make_celery(name: str, settings: Settings | None = None) -> Celery:
    celery = Celery(name)
    celery.conf.update(celery_config(settings or get_settings()))
    return celery


@lru_cache
def get_sender() -> Celery:
    """The API's Celery app: it only sends tasks by name."""
    return make_celery("api")


def send(task_name: str, args: list[Any], queue: str) -> None:
    get_sender().send_task(task_name, args=args, queue=queue)


def dispatch_training(job_id: str, celery: Celery | None = None) -> None:
    """Send a queued job's training task, then record that it was sent. Raises when the broker is away: the
    job stays undispatched, and a worker's reaper sends it later (worker/reaper.py). celery: the caller's app
    (a worker's), else the API's sender."""
    with session_scope() as session:
        job = session.get(Job, job_id)
        accelerator = TrainingSpec.stored(job.training_config if job is not None else None).accelerator
    (celery or get_sender()).send_task(TRAIN, args=[job_id], queue=ACCELERATOR_QUEUES[accelerator])
    with session_scope() as session:
        mark_dispatched(session, job_id)


def dispatch_background(task_name: str, table: task_rows.Table, row_id: str, celery: Celery | None = None) -> None:
    """Send the task of a queued background row (an evaluation, a file translation) to the inference queue; when
    the broker is away the row fails saying so, and the error is raised for the caller's 503."""
    try:
        (celery or get_sender()).send_task(task_name, args=[row_id], queue=INFERENCE_QUEUE)
    except Exception as exc:
        with session_scope() as session:
            task_rows.fail(session, table, row_id, f"the broker is unavailable ({type(exc).__name__}); ask again")
        raise


DEPTH_TTL = 0.25  # seconds a queue-depth reading is reused: the bound is coarse, the check must be cheap
_depth: tuple[float, int] = (0.0, 0)
_depth_refresh = threading.Lock()


def read_depth(queue: str = INFERENCE_QUEUE) -> int:
    """Messages waiting in a queue (Redis LLEN, or a row count on the SQLite transport), on a pooled connection.
    A declare is what AMQP offers to count a queue's messages; on these transports it creates nothing new."""
    with get_sender().pool.acquire(block=True) as connection:
        return int(connection.default_channel.queue_declare(queue=queue, passive=False).message_count)


def queue_depth() -> int:
    """The inference queue's depth, at most DEPTH_TTL old. One request thread refreshes it at a time; the others
    use the last reading rather than all opening connections at once."""
    global _depth
    if time.monotonic() - _depth[0] > DEPTH_TTL and _depth_refresh.acquire(blocking=False):
        try:
            _depth = (time.monotonic(), read_depth())
        finally:
            _depth_refresh.release()
    return _depth[1]
