"""The reaper: re-queues jobs whose lease expired and (re)sends jobs whose message was never sent or lost.

Every worker runs it from its heartbeat thread; the conditional UPDATEs in app.db.job_rows make concurrent
reapers harmless, and a duplicate message is a no-op for the training task.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import Celery

from app.db import job_rows
from app.db.session import session_scope
from app.queueing import dispatch_training
from app.settings import get_settings

log = logging.getLogger(__name__)


def sweep(celery: Celery) -> tuple[list[str], list[str], list[str]]:
    """One pass. Returns (requeued, failed, dispatched) job ids."""
    settings = get_settings()
    with session_scope() as session:
        requeued, failed = job_rows.reap_expired(session)
        to_send = job_rows.undispatched(session, timedelta(seconds=settings.job_redispatch_seconds))
    for job_id in requeued:
        log.warning("job %s: lease expired; back in the queue", job_id)
    for job_id in failed:
        log.error("job %s: lease expired on its last attempt; failed", job_id)
    dispatched = []
    for job_id in to_send:
        dispatch_training(job_id, celery)
        dispatched.append(job_id)
    return requeued, failed, dispatched
