"""Members of the caller's organisation (scope admin): add one, list them, change a role. A lowered role takes effect
on the member's keys at once in this API process, and within AUTH_CACHE_SECONDS in the others."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, status

from app.api import audit, ttl_cache
from app.api.deps import SessionDep
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import AdminKey
from app.core.scopes import parse_role
from app.db.access_tables import Member
from app.db.members import key_hashes
from app.schemas.access import MemberCreate, MemberPublic, MemberUpdate
from app.schemas.common import Page
from app.services import members

router = APIRouter(prefix="/v1/members", tags=["access"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Not found"}}


@router.post(
    "",
    response_model=MemberPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        400: {"description": "Body is not UTF-8 JSON"},
        409: {"description": "The organisation has a member of that name"},
    },
)
def create_member(body: MemberCreate, session: SessionDep, key: AdminKey, request: Request) -> MemberPublic:
    member = members.add(session, key, body.name, parse_role(body.role))
    session.flush()  # the member's id
    audit.record(session, key, request, "member.added", "member", member.id, {"name": member.name, "role": member.role})
    session.commit()
    return MemberPublic.model_validate(member)


@router.get("", response_model=Page[MemberPublic])
def list_members(session: SessionDep, key: AdminKey, limit: Limit = 50, offset: Offset = 0) -> Page[MemberPublic]:
    """The organisation's members by name."""
    order = (Member.name, Member.id)
    return paginate(session, members.listed(key), order, limit, offset, MemberPublic.model_validate)


@router.patch(
    "/{member_id}",
    response_model=MemberPublic,
    responses={
        **NOT_FOUND,
        400: {"description": "Body is not UTF-8 JSON"},
        409: {"description": "The caller's own member, or the last admin losing the role"},
    },
)
def update_member(
    member_id: str, body: MemberUpdate, session: SessionDep, key: AdminKey, request: Request
) -> MemberPublic:
    member, before = members.set_role(session, key, member_id, parse_role(body.role))
    if member.role != before:
        details = {"name": member.name, "from": before, "to": member.role}
        audit.record(session, key, request, "member.role_changed", "member", member.id, details)
    session.commit()
    for digest in key_hashes(session, member.id):  # its keys' callers hold the old role
        ttl_cache.callers().forget(digest)
    return MemberPublic.model_validate(member)
