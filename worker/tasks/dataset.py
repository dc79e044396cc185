"""Datasets' tasks on the data queue: parse and check an uploaded or registered dataset (worker/data/ingest.py), make
a filtered one (worker/data/filtering.py)."""

from __future__ import annotations

from celery import shared_task

from app.core.task_names import FILTER_DATASET, PROCESS_DATASET
from worker.data import filtering, ingest


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=PROCESS_DATASET, acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def process_dataset(dataset_id: str) -> str:
    return ingest.process(dataset_id)


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=FILTER_DATASET, acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def filter_dataset(dataset_id: str) -> str:
    return filtering.make(dataset_id)
