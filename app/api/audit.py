"""Recording an audit event from a route: `record(session, key, request, action, kind, object_id, details)`.

The row joins the session of the change (app/db/audit_rows.py): the commit that makes the change writes it, and a
rollback drops it. The request's id (app/api/request_id.py) and the client's address say where it came from.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request

from app.api.audit_actions import ACTIONS
from app.core import logs
from app.db.audit_rows import Origin, add_event
from app.db.audit_tables import AuditEvent
from app.db.base import Base
from app.db.keys import Caller


def origin(request: Request) -> Origin:
    client = request.client.host if request.client else None
    return Origin(request_id=logs.bound().get("request_id"), client=client)


def record(
    session: Session,
    key: Caller,
    request: Request,
    action: str,
    kind: str,
    object_id: str | type[Base],
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Add the audit row of `action` on `kind` `object_id` (an id, or the table class of the row this transaction
    creates) to the change's session; the change's commit writes it."""
    assert action in ACTIONS, f"audit action {action!r} is not in app/api/audit_actions.py"
    return add_event(session, key, origin(request), action, kind, object_id, details)
