"""The one Celery configuration, shared by the API (which only sends) and the workers."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

from app.settings import Settings, get_settings
from app.tasks import INFERENCE_QUEUE, QUEUES


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
        "result_backend": settings.celery_result_backend,
        "result_expires": 3600,
        "result_extended": False,
        "task_ignore_result": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # Each queue on its own direct exchange and key (a bare Queue(name) would be bound to the default queue's).
        "task_queues": [Queue(name, Exchange(name, type="direct"), routing_key=name) for name in QUEUES],
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
