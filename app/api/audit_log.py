"""The organisation's audit trail (scope admin): who changed what, when and from where; newest first."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BeforeValidator
from sqlalchemy import or_, select

from app.api.audit_actions import ACTIONS, KINDS
from app.api.deps import SessionDep
from app.api.errors import bad_query
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import AdminKey
from app.db.audit_tables import AuditEvent
from app.schemas.audit import AuditEventPublic
from app.schemas.common import Page

router = APIRouter(prefix="/v1/audit", tags=["access"])


def iso_8601_only(value: object) -> object:
    """pydantic reads a number as seconds since 1970 (`until=0.5`); these times are ISO 8601 text alone."""
    if not isinstance(value, str):
        return value
    try:
        float(value)
    except ValueError:
        return value
    raise ValueError(f"{value!r} is not ISO 8601: give a date and time with a timezone, e.g. 2026-01-31T12:00:00Z")


IsoTime = Annotated[datetime | None, BeforeValidator(iso_8601_only)]


@router.get("", response_model=Page[AuditEventPublic])
def list_events(
    session: SessionDep,
    key: AdminKey,
    action: Annotated[
        str | None, Query(max_length=60, description="e.g. job.submitted", json_schema_extra={"enum": list(ACTIONS)})
    ] = None,
    kind: Annotated[
        str | None, Query(max_length=30, description="e.g. job, model, alias", json_schema_extra={"enum": list(KINDS)})
    ] = None,
    object_id: Annotated[str | None, Query(max_length=300)] = None,
    member: Annotated[str | None, Query(max_length=100, description="a member's name or id")] = None,
    api_key: Annotated[str | None, Query(alias="key", max_length=100, description="a key's id or prefix")] = None,
    since: Annotated[IsoTime, Query(description="ISO 8601 with a timezone; inclusive")] = None,
    until: Annotated[IsoTime, Query(description="ISO 8601 with a timezone; exclusive")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[AuditEventPublic]:
    """The organisation's audit events, newest first, filtered by every parameter given."""
    query = select(AuditEvent).where(AuditEvent.owner_id == key.owner_id)
    if action is not None:
        if action not in ACTIONS:
            raise bad_query("action", f"unknown action {action!r}; one of: {', '.join(ACTIONS)}")
        query = query.where(AuditEvent.action == action)
    if kind is not None:
        if kind not in KINDS:
            raise bad_query("kind", f"unknown kind {kind!r}; one of: {', '.join(KINDS)}")
        query = query.where(AuditEvent.object_kind == kind)
    if object_id is not None:
        query = query.where(AuditEvent.object_id == object_id)
    if member is not None:
        query = query.where(or_(AuditEvent.member_name == member, AuditEvent.member_id == member))
    if api_key is not None:
        prefix = api_key.removesuffix("...")
        query = query.where(or_(AuditEvent.key_id == api_key, AuditEvent.key_prefix == prefix))
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise bad_query(name, f"{name} {value.isoformat()} has no timezone; add one, e.g. Z or +00:00")
    if since is not None and until is not None and until <= since:
        raise bad_query("until", f"until {until.isoformat()} is not after since {since.isoformat()}")
    if since is not None:
        query = query.where(AuditEvent.created_at >= since)
    if until is not None:
        query = query.where(AuditEvent.created_at < until)
    order = (AuditEvent.created_at.desc(), AuditEvent.id.desc())
    return paginate(session, query, order, limit, offset, AuditEventPublic.model_validate)
