"""The collector's task on the data queue: delete the files of deleted rows (worker/collector.py). It takes tombstone
ids, re-reads each, and is a no-op for those already collected."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task

from app.artifacts import get_store
from app.core.settings import get_settings
from app.core.task_names import COLLECT_ARTIFACTS
from worker import collector


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=COLLECT_ARTIFACTS, acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def collect_artifacts(tombstone_ids: list[int]) -> list[str]:
    grace = timedelta(seconds=get_settings().artifact_grace_seconds)
    return collector.collect(get_store(), [int(i) for i in tombstone_ids], grace)
