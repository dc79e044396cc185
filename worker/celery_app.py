"""The workers' Celery app: `celery -A worker.celery_app worker -Q training -c 1`."""

from __future__ import annotations

import logging

import torch
from celery.signals import worker_process_init, worker_ready, worker_shutdown

from app.queueing import make_celery
from app.settings import get_settings
from worker import heartbeat

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

app = make_celery("worker")
app.conf.include = ["worker.tasks.ping", "worker.tasks.training", "worker.tasks.inference"]


def set_torch_threads(**_kwargs) -> None:
    """On a shared CPU, fewer threads than cores is often much faster: TORCH_THREADS sets it per process."""
    if get_settings().torch_threads:
        torch.set_num_threads(get_settings().torch_threads)


set_torch_threads()
worker_process_init.connect(set_torch_threads)


@worker_ready.connect
def _start_heartbeat(sender, **_kwargs) -> None:
    queues = sorted(q.name for q in sender.app.amqp.queues.consume_from.values())
    heartbeat.start(sender.app, sender.hostname, queues)


@worker_shutdown.connect
def _stop_heartbeat(**_kwargs) -> None:
    heartbeat.stop()
