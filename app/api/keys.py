"""API keys: create one (its secret shown once), list them, revoke one. Any valid key manages its own member's keys
within its own scopes and expiry; scope admin extends that to every member of the organisation
(app/services/api_keys.py), and alone sets a key's own requests per minute (app/api/ratelimit.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, status
from sqlalchemy.orm import Session

from app.api import audit, ttl_cache
from app.api.deps import SessionDep
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import AdminKey, AnyKey
from app.core.scopes import parse_scopes
from app.db.access_tables import ApiKey, Member
from app.schemas.access import KeyCreate, KeyPublic, KeyUpdate, KeyWithSecret
from app.schemas.common import Page
from app.services import api_keys

router = APIRouter(prefix="/v1/keys", tags=["access"])
REFUSED: dict[int | str, dict[str, Any]] = {
    403: {
        "description": "Scopes beyond the caller's own or the member's role, or another member or a rate limit "
        "without admin"
    },
    422: {
        "description": "An unknown scope or member, no scope, an expiry in the past, without a timezone or later than "
        "the creating key's own, a rate limit out of bounds"
    },
}


def public(session: Session, row: ApiKey) -> KeyPublic:
    member = session.get(Member, row.member_id)
    return KeyPublic(
        id=row.id,
        prefix=row.prefix,
        name=row.name,
        scopes=parse_scopes(row.scopes),
        member=member.name if member else "",
        member_id=row.member_id,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        rate_limit_per_minute=row.rate_limit_per_minute,
    )


@router.post("", response_model=KeyWithSecret, status_code=status.HTTP_201_CREATED, responses=REFUSED)
def create_key(body: KeyCreate, session: SessionDep, key: AnyKey, request: Request) -> KeyWithSecret:
    """A new key; `key` in the answer is its secret, shown this once and never again."""
    row, clear = api_keys.create(
        session,
        key,
        body.name,
        body.scopes,
        body.member,
        body.expires_at,
        body.expires_in_days,
        body.rate_limit_per_minute,
    )
    session.flush()  # the key's id
    details: dict[str, Any] = {
        "name": row.name,
        "prefix": row.prefix,
        "member_id": row.member_id,
        "scopes": list(row.scopes or []),
    }
    if row.rate_limit_per_minute is not None:
        details["rate_limit_per_minute"] = row.rate_limit_per_minute
    audit.record(session, key, request, "key.created", "key", row.id, details)
    session.commit()
    return KeyWithSecret(**public(session, row).model_dump(), key=clear)


@router.get("", response_model=Page[KeyPublic])
def list_keys(session: SessionDep, key: AnyKey, limit: Limit = 50, offset: Offset = 0) -> Page[KeyPublic]:
    """The organisation's keys for a key with scope admin, else the keys of the caller's member; newest first."""
    query = api_keys.visible(key)
    return paginate(session, query, api_keys.NEWEST_FIRST, limit, offset, lambda row: public(session, row))


@router.delete(
    "/{key_id}",
    response_model=KeyPublic,
    responses={
        403: {"description": "Without scope admin: a key holding a scope the caller lacks"},
        404: {"description": "Not found"},
    },
)
def revoke_key(key_id: str, session: SessionDep, key: AnyKey, request: Request) -> KeyPublic:
    """Revoke a key at once in this API process, and within AUTH_CACHE_SECONDS in the others. Without scope admin, a
    key revokes its member's keys whose scopes it holds too (and itself)."""
    found = session.get(ApiKey, key_id)
    was_revoked = found is not None and found.revoked_at is not None
    row = api_keys.revoke(session, key, key_id)
    if not was_revoked:  # revoked now (again: the same answer, nothing recorded)
        audit.record(session, key, request, "key.revoked", "key", row.id, {"name": row.name, "prefix": row.prefix})
    session.commit()
    ttl_cache.callers().forget(row.key_hash)
    return public(session, row)


@router.patch(
    "/{key_id}",
    response_model=KeyPublic,
    responses={
        404: {"description": "Not found"},
        409: {"description": "The key is revoked"},
        422: {"description": "A rate limit out of bounds"},
    },
)
def update_key(key_id: str, body: KeyUpdate, session: SessionDep, key: AdminKey, request: Request) -> KeyPublic:
    """Set a key's own requests per minute (null: RATE_LIMIT_PER_MINUTE again). It applies at once in this API
    process, and within AUTH_CACHE_SECONDS in the others."""
    row, before = api_keys.set_rate_limit(session, key, key_id, body.rate_limit_per_minute)
    if row.rate_limit_per_minute != before:
        details = {"name": row.name, "prefix": row.prefix, "from": before, "to": row.rate_limit_per_minute}
        audit.record(session, key, request, "key.rate_limit_changed", "key", row.id, details)
    session.commit()
    ttl_cache.callers().forget(row.key_hash)
    return public(session, row)
