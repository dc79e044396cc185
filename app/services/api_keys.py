"""API keys over the API: a key creates keys within what it may do itself and expiring no later than itself, lists its
member's keys and revokes those no stronger than itself; a key with scope `admin` does so for every member of its
organisation (docs/security.md)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.core.scopes import ROLE_SCOPES, Role, Scope, parse_role, parse_scopes, sorted_scopes
from app.db.access_tables import ApiKey, Member
from app.db.base import utcnow
from app.db.keys import Caller, insert_key, key_scopes
from app.services.errors import Conflict, Forbidden, InvalidField, NotFound

log = logging.getLogger(__name__)


def member_of(session: Session, caller: Caller, name_or_id: str) -> Member:
    """The member of the caller's organisation with this name or id; 422 naming it if there is none."""
    member = session.scalar(
        select(Member).where(
            Member.owner_id == caller.owner_id, (Member.name == name_or_id) | (Member.id == name_or_id)
        )
    )
    if member is None:
        raise InvalidField("member", f"no member named {name_or_id!r} in organisation {caller.owner_name!r}")
    return member


def _acting_for(session: Session, caller: Caller, name_or_id: str | None) -> Member:
    """The member a new key is for: the caller's own, or (scope admin) another of its organisation."""
    if name_or_id is None:
        member = session.get(Member, caller.member_id)
        assert member is not None, caller  # ON DELETE CASCADE: a key's member outlives it
        return member
    member = member_of(session, caller, name_or_id)
    if member.id != caller.member_id:
        _need_admin(caller, f"a key for another member ({member.name!r})")
    return member


def _need_admin(caller: Caller, what: str) -> None:
    """403 naming `what` unless the caller holds scope admin."""
    if Scope.ADMIN not in caller.scopes:
        raise Forbidden(
            f"API key {caller.prefix}... lacks scope 'admin', which {what} needs; its scopes: "
            f"{', '.join(sorted_scopes(caller.scopes)) or 'none'}"
        )


def _expiry(caller: Caller, expires_at: datetime | None, expires_in_days: int | None) -> datetime | None:
    """A new key's expiry: the one asked for, which may not be later than the creating key's own (422 naming both);
    none asked for: the creating key's (None: it never expires)."""
    if expires_in_days is not None:
        field, asked = "expires_in_days", utcnow() + timedelta(days=expires_in_days)
        what = f"expires_in_days {expires_in_days} (until {asked.isoformat()})"
    elif expires_at is not None:
        if expires_at <= utcnow():
            raise InvalidField("expires_at", f"expires_at {expires_at.isoformat()} is in the past")
        field, asked, what = "expires_at", expires_at, f"expires_at {expires_at.isoformat()}"
    else:
        return caller.expires_at
    if caller.expires_at is not None and asked > caller.expires_at:
        raise InvalidField(
            field,
            f"{what} is later than {caller.expires_at.isoformat()}, when API key {caller.prefix}... that creates it "
            "expires: a key outlives no key that made it; ask for that time or earlier, or leave the expiry out to "
            "give the new key the same",
        )
    return asked


def create(
    session: Session,
    caller: Caller,
    name: str,
    scopes: Sequence[str] | None,
    member_name: str | None = None,
    expires_at: datetime | None = None,
    expires_in_days: int | None = None,
    rate_limit_per_minute: int | None = None,
) -> tuple[ApiKey, str]:
    """A new key (row, clear key). Its scopes (default: all the caller may use that the member's role allows) must be
    ones the caller holds itself (no key makes a stronger one) and that the member's role allows: 403 naming them.
    Its expiry (default: the caller's) may not be later than the caller's: 422 naming both (no key makes a longer-lived
    one). A limit of its own (`rate_limit_per_minute`) needs scope admin, as setting it later does."""
    if rate_limit_per_minute is not None:
        _need_admin(caller, f"a key's own rate_limit_per_minute ({rate_limit_per_minute})")
    member = _acting_for(session, caller, member_name)
    role_allows = ROLE_SCOPES[parse_role(member.role)]
    if scopes is None:
        wanted = [scope for scope in parse_scopes(caller.scopes) if scope in role_allows]
    else:
        wanted = parse_scopes(scopes)
    if not wanted:
        raise InvalidField("scopes", "a key needs at least one scope")
    if Scope.OPERATOR in wanted and parse_role(member.role) is not Role.OPERATOR:
        raise Forbidden(
            f"scope 'operator' is the service's operators' (app.cli create-operator-key): no key of organisation "
            f"{caller.owner_name!r} may hold it"
        )
    stronger = [scope.value for scope in wanted if scope not in caller.scopes]
    if stronger:
        raise Forbidden(
            f"API key {caller.prefix}... cannot give scopes it lacks itself: {', '.join(stronger)}; its scopes: "
            f"{', '.join(sorted_scopes(caller.scopes)) or 'none'}"
        )
    try:
        expiry = _expiry(caller, expires_at, expires_in_days)
        row, clear = insert_key(session, member, name, wanted, expiry, rate_limit_per_minute)
    except ValueError as exc:  # beyond the member's role
        raise Forbidden(str(exc)) from exc
    log.info(
        "key %s (%s) created for member %s with %s by key %s",
        row.id,
        name,
        member.name,
        ",".join(row.scopes),
        caller.id,
    )
    return row, clear


NEWEST_FIRST = (ApiKey.created_at.desc(), ApiKey.id)


def visible(caller: Caller) -> Select[ApiKey]:
    """The keys the caller may see: its organisation's with scope admin, else its member's (order: NEWEST_FIRST)."""
    query = select(ApiKey).where(ApiKey.owner_id == caller.owner_id)
    if Scope.ADMIN not in caller.scopes:
        query = query.where(ApiKey.member_id == caller.member_id)
    return query


def revoke(session: Session, caller: Caller, key_id: str) -> ApiKey:
    """Revoke a key the caller may see (404 for any other, as for an unknown one); revoking twice keeps the first
    time. Without scope admin, only a key whose scopes the caller holds too (403 naming those it lacks): a weaker key
    does not take a stronger one away. The caller's own key may revoke itself."""
    row = session.get(ApiKey, key_id)
    if row is None or row.owner_id != caller.owner_id:
        raise NotFound("API key", key_id)
    if Scope.ADMIN not in caller.scopes and row.id != caller.id:
        if row.member_id != caller.member_id:
            raise NotFound("API key", key_id)
        lacking = [scope.value for scope in key_scopes(row) if scope not in caller.scopes]
        if lacking:
            raise Forbidden(
                f"API key {caller.prefix}... cannot revoke key {row.prefix}... ({row.name!r}), which holds scopes it "
                f"lacks itself: {', '.join(lacking)}; its scopes: {', '.join(sorted_scopes(caller.scopes)) or 'none'}"
            )
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.flush()
        log.info("key %s revoked by key %s", row.id, caller.id)  # ids: a key's prefix is redacted from logs
    return row


def set_rate_limit(session: Session, caller: Caller, key_id: str, per_minute: int | None) -> tuple[ApiKey, int | None]:
    """Give a key of the caller's organisation its own requests per minute (None: the service's
    RATE_LIMIT_PER_MINUTE again); 404 for any other id, as for an unknown one; 409 for a revoked key. Returns (row,
    the limit it had). The route needs scope admin; the limiter reads the new limit once the key's remembered caller
    is forgotten (app/api/ratelimit.py)."""
    row = session.get(ApiKey, key_id)
    if row is None or row.owner_id != caller.owner_id:
        raise NotFound("API key", key_id)
    _need_admin(caller, "a key's own rate_limit_per_minute")
    if row.revoked_at is not None:
        raise Conflict(f"API key {row.prefix}... ({key_id}) is revoked: it has no rate limit to change")
    before = row.rate_limit_per_minute
    if per_minute != before:
        row.rate_limit_per_minute = per_minute
        session.flush()
        log.info("key %s rate limit %s -> %s by key %s", row.id, before, per_minute, caller.id)
    return row, before
