"""The memory of one training step, measured once per job (model/train/memory_profile.py) and stored for
GET /v1/jobs/{id}/memory."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from app.db import memory_rows
from app.db.session import session_scope

log = logging.getLogger(__name__)


def memory_callback(job_id: str) -> Callable[[dict[str, Any]], None] | None:
    """Callbacks.on_memory for a job not measured yet; None once a report is stored (a later attempt, a resume)."""
    try:
        with session_scope() as session:
            if memory_rows.measured(session, job_id):
                return None
    except Exception:  # the database is briefly away: this attempt trains without measuring
        log.exception("job %s: could not read its memory report; not measuring", job_id)
        return None

    def on_memory(report: dict[str, Any]) -> None:
        try:
            with session_scope() as session:
                memory_rows.record(session, job_id, report)
        except Exception:  # a report is worth no failed job: the next attempt measures again
            log.exception("job %s: the memory report was not stored", job_id)

    return on_memory
