"""Repository functions for API keys: creation within a member's role, lookup by hash, revocation."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.scopes import ALL_SCOPES, ROLE_SCOPES, Role, Scope, beyond_role, effective, parse_role, parse_scopes
from app.core.security import display_prefix, generate_key, hash_key, key_matches
from app.db.access_tables import ApiKey, Member, Owner
from app.db.base import utcnow
from app.db.members import find_or_create_member, holds_operators

LAST_USED_RESOLUTION = timedelta(minutes=1)  # avoid a write on every request
MAX_NAME = 100


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: a snapshot of its API key's row, its member and its organisation (owner), as
    `caller_of` reads it. The defaults grant nothing: the service acting later for a key it recorded (a sweep
    registering its best model) reads the key again rather than assume what it may do."""

    id: str
    owner_id: str
    owner_name: str
    name: str
    prefix: str
    member_id: str = ""
    member_name: str = ""
    role: Role = Role.VIEWER
    key_scopes: frozenset[Scope] = frozenset()
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    rate_limit_per_minute: int | None = None  # the key's own; None: RATE_LIMIT_PER_MINUTE (app/api/ratelimit.py)

    @property
    def scopes(self) -> frozenset[Scope]:
        """What the key may do now: its scopes that its member's role allows."""
        return effective(self.role, self.key_scopes)

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


def key_scopes(row: ApiKey) -> list[Scope]:
    """The scopes stored on a key row; a value this version does not know is left out (it grants nothing)."""
    return [scope for scope in ALL_SCOPES if scope.value in set(row.scopes or [])]


def insert_key(
    session: Session,
    member: Member,
    name: str,
    scopes: Iterable[Scope],
    expires_at: datetime | None = None,
    rate_limit_per_minute: int | None = None,
) -> tuple[ApiKey, str]:
    """A new key of `member` holding `scopes` (and its own requests per minute, if any); ValueError naming what its
    role does not allow. Returns (row, clear key): the clear key is shown once and never stored."""
    if not name or len(name) > MAX_NAME:
        raise ValueError(f"key name must be 1-{MAX_NAME} characters, got {len(name)}")
    scopes = list(scopes)
    role = parse_role(member.role)
    beyond = beyond_role(role, scopes)
    if beyond:
        allowed = ", ".join(s for s in ALL_SCOPES if s in ROLE_SCOPES[role])
        raise ValueError(
            f"member {member.name!r} is a {role.value}, whose keys may hold only {allowed}: not {', '.join(beyond)}"
        )
    if expires_at is not None and expires_at <= utcnow():
        raise ValueError(f"expires_at {expires_at.isoformat()} is in the past")
    clear = generate_key()
    row = ApiKey(
        owner_id=member.owner_id,
        member_id=member.id,
        name=name,
        prefix=display_prefix(clear),
        key_hash=hash_key(clear),
        scopes=[scope.value for scope in ALL_SCOPES if scope in set(scopes)],
        expires_at=expires_at,
        rate_limit_per_minute=rate_limit_per_minute,
    )
    session.add(row)
    session.flush()
    return row, clear


def create_key(
    session: Session,
    name: str,
    owner_name: str | None = None,
    *,
    member_name: str | None = None,
    role: str | None = None,
    scopes: Iterable[str] | None = None,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Create a key named `name` for a member (default: named as the organisation) of organisation `owner_name`
    (default: `name`), creating either if new; a new member gets `role` (default admin). The key holds `scopes`
    (default: all its member's role allows). Returns (row, clear key). An operator's key is not made here
    (app/db/operators.py): role operator, or the operators' own organisation, is a ValueError."""
    if not name or len(name) > MAX_NAME:
        raise ValueError(f"key name must be 1-{MAX_NAME} characters, got {len(name)}")
    if role is not None and parse_role(role) is Role.OPERATOR:
        raise ValueError(f"role {role!r} is the service's operators': their keys come from create-operator-key")
    owner_name = owner_name or name
    owner = session.scalar(select(Owner).where(Owner.name == owner_name))
    if owner is not None and holds_operators(session, owner.id):
        raise ValueError(
            f"organisation {owner_name!r} holds the service's operators: its keys come from create-operator-key"
        )
    if owner is None:
        owner = Owner(name=owner_name)
        session.add(owner)
        session.flush()
    member = find_or_create_member(
        session, owner, member_name or owner_name, None if role is None else parse_role(role)
    )
    wanted = ROLE_SCOPES[parse_role(member.role)] if scopes is None else parse_scopes(scopes)
    return insert_key(session, member, name, wanted, expires_at)


def find_key(session: Session, clear_key: str) -> ApiKey | None:
    """The key row for `clear_key`, active or not, or None. Looked up by hash, then compared in constant time."""
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(clear_key)))
    if row is None or not key_matches(clear_key, row.key_hash):
        return None
    return row


def _active(row: ApiKey, now: datetime) -> bool:
    return row.revoked_at is None and (row.expires_at is None or row.expires_at > now)


def _stamp_use(session: Session, row: ApiKey, now: datetime) -> None:
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        row.last_used_at = now
        session.commit()


def authenticate(session: Session, clear_key: str) -> ApiKey | None:
    """The active (neither revoked nor expired) key row for `clear_key`, or None; stamps its last use."""
    row, now = find_key(session, clear_key), utcnow()
    if row is None or not _active(row, now):
        return None
    _stamp_use(session, row, now)
    return row


def caller_of(session: Session, row: ApiKey) -> Caller:
    member = session.get(Member, row.member_id)
    owner_name = session.scalar(select(Owner.name).where(Owner.id == row.owner_id))
    return Caller(
        id=row.id,
        owner_id=row.owner_id,
        owner_name=owner_name or "",
        name=row.name,
        prefix=row.prefix,
        member_id=row.member_id,
        member_name=member.name if member else "",
        role=parse_role(member.role) if member else Role.VIEWER,
        key_scopes=frozenset(key_scopes(row)),
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        rate_limit_per_minute=row.rate_limit_per_minute,
    )


def identify(session: Session, clear_key: str) -> Caller | None:
    """The caller holding `clear_key`, or None for an unknown key. A revoked or expired key is a caller too, with
    its `revoked_at` / `expires_at`: the API refuses it naming why (app/api/deps.py)."""
    row, now = find_key(session, clear_key), utcnow()
    if row is None:
        return None
    if _active(row, now):
        _stamp_use(session, row, now)
    return caller_of(session, row)


def revoke_keys(session: Session, prefix_or_name: str) -> list[str]:
    """Revoke the active keys whose display prefix or name is `prefix_or_name`; returns their prefixes."""
    rows = session.scalars(
        select(ApiKey).where(
            ApiKey.revoked_at.is_(None), (ApiKey.prefix == prefix_or_name) | (ApiKey.name == prefix_or_name)
        )
    )
    revoked = []
    for row in rows:
        row.revoked_at = utcnow()
        revoked.append(row.prefix)
    session.flush()
    return revoked
