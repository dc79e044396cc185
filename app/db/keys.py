"""Repository functions for owners and API keys."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.security import display_prefix, generate_key, hash_key, key_matches
from app.db.base import utcnow
from app.db.tables import ApiKey, Owner

LAST_USED_RESOLUTION = timedelta(minutes=1)  # avoid a write on every request


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: a snapshot of its API key's row and its owner's name."""

    id: str
    owner_id: str
    owner_name: str
    name: str
    prefix: str


def create_key(session: Session, name: str, owner_name: str | None = None) -> tuple[ApiKey, str]:
    """Create a key for `owner_name` (default: `name`), creating the owner if new. Returns (row, clear key)."""
    if not name or len(name) > 100:
        raise ValueError(f"key name must be 1-100 characters, got {len(name)}")
    owner_name = owner_name or name
    owner = session.scalar(select(Owner).where(Owner.name == owner_name))
    if owner is None:
        owner = Owner(name=owner_name)
        session.add(owner)
        session.flush()
    clear = generate_key()
    row = ApiKey(owner_id=owner.id, name=name, prefix=display_prefix(clear), key_hash=hash_key(clear))
    session.add(row)
    session.flush()
    return row, clear


def authenticate(session: Session, clear_key: str) -> ApiKey | None:
    """The active key row for `clear_key`, or None. Looked up by hash, then compared in constant time."""
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(clear_key), ApiKey.revoked_at.is_(None)))
    if row is None or not key_matches(clear_key, row.key_hash):
        return None
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        row.last_used_at = now
        session.commit()
    return row


def identify(session: Session, clear_key: str) -> Caller | None:
    """The caller holding `clear_key`, or None for an unknown or revoked key (see `authenticate`)."""
    row = authenticate(session, clear_key)
    if row is None:
        return None
    owner_name = session.scalar(select(Owner.name).where(Owner.id == row.owner_id))
    return Caller(id=row.id, owner_id=row.owner_id, owner_name=owner_name or "", name=row.name, prefix=row.prefix)


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
