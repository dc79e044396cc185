"""The ping task: proves a message went API -> broker -> this worker -> database."""

from __future__ import annotations

import logging
from typing import Any, cast

from celery import Task, shared_task
from sqlalchemy import CursorResult, update

from app.core.task_names import PING
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import Ping

log = logging.getLogger(__name__)


@shared_task(name=PING, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]  # celery ships no types
def ping(self: Task, ping_id: str) -> None:
    hostname = self.request.hostname or "unknown"
    with session_scope() as session:
        # Conditional update: a redelivered message finds the row answered and changes nothing.
        result = session.execute(
            update(Ping)
            .where(Ping.id == ping_id, Ping.answered_at.is_(None))
            .values(answered_at=utcnow(), worker=hostname)
        )
        done = cast("CursorResult[Any]", result).rowcount  # an UPDATE's result
    if done:
        log.info("ping %s answered by %s", ping_id, hostname)
    else:
        log.info("ping %s already answered or gone; nothing to do", ping_id)
