"""Writing the audit trail in the transaction of the change it records.

`add_event` adds the row to the change's session, never commits: the route's (or the service's) commit writes both,
and a rollback drops both. When the object is created by the same transaction (a job submitted, a dataset uploaded),
its id is not known before the row is flushed: the event then names the table class instead of an id, waits in the
session, and takes the id of the first new row of that class when a flush inserts one. An event still waiting when
the transaction ends (nothing was created: an idempotent replay) is dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, UOWTransaction

from app.db.audit_tables import AuditEvent
from app.db.base import Base
from app.db.keys import Caller

log = logging.getLogger(__name__)
PENDING = "audit_pending"  # session.info: events waiting for the id of the row their transaction creates
MAX_DETAIL = 500  # a detail's text is cut there: the trail is a record, not a copy of the request


@dataclass(frozen=True)
class Origin:
    """Where a request came from."""

    request_id: str | None
    client: str | None


def _small(value: Any) -> Any:
    if isinstance(value, str):
        return value[:MAX_DETAIL]
    if isinstance(value, dict):
        return {str(k)[:100]: _small(v) for k, v in list(value.items())[:50]}
    if isinstance(value, list | tuple):
        return [_small(v) for v in list(value)[:50]]
    return value


def add_event(
    session: Session,
    caller: Caller,
    origin: Origin,
    action: str,
    kind: str,
    object_id: str | type[Base],
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """An audit row for `action` on the object `kind`/`object_id`, added to the session (not committed).

    `object_id` is the object's id, or the table class of the row this transaction creates (its id is filled in when
    that row is flushed)."""
    row = AuditEvent(
        owner_id=caller.owner_id,
        action=action,
        object_kind=kind,
        object_id=object_id if isinstance(object_id, str) else "",
        details=_small(details or {}),
        key_id=caller.id or None,
        key_name=caller.name or None,
        key_prefix=caller.prefix or None,
        member_id=caller.member_id or None,
        member_name=caller.member_name or None,
        request_id=origin.request_id,
        client=origin.client,
    )
    if isinstance(object_id, str):
        session.add(row)
    else:
        session.info.setdefault(PENDING, []).append((row, object_id))
    return row


@event.listens_for(Session, "after_flush")
def _take_ids(session: Session, _flush: UOWTransaction) -> None:
    """Give each waiting event the id of the first new row of its class this flush inserted."""
    waiting: list[tuple[AuditEvent, type[Base]]] = session.info.get(PENDING, [])
    if not waiting:
        return
    claimed: set[int] = set()
    still: list[tuple[AuditEvent, type[Base]]] = []
    ready: list[AuditEvent] = []
    for row, table in waiting:
        created = next((o for o in session.new if isinstance(o, table) and id(o) not in claimed), None)
        if created is None:
            still.append((row, table))
            continue
        claimed.add(id(created))
        row.object_id = str(created.id)  # type: ignore[attr-defined]
        ready.append(row)
    session.info[PENDING] = still
    session.info.setdefault("audit_ready", []).extend(ready)


@event.listens_for(Session, "after_flush_postexec")
def _add_ready(session: Session, _flush: UOWTransaction) -> None:
    """Add the events that have their ids (the commit's next flush writes them, in the same transaction)."""
    for row in session.info.pop("audit_ready", []):
        session.add(row)


@event.listens_for(Session, "after_commit")
def _drop_waiting_after_commit(session: Session) -> None:
    for row, table in session.info.pop(PENDING, []):
        log.info("audit event %s dropped: the transaction created no %s", row.action, table.__name__)


@event.listens_for(Session, "after_rollback")
def _drop_waiting_after_rollback(session: Session) -> None:
    session.info.pop(PENDING, None)
    session.info.pop("audit_ready", None)
