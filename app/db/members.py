"""Repository functions for the members of an organisation (the `owners` table) and their roles."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.scopes import Role
from app.db.access_tables import ApiKey, Member, Owner

MAX_NAME = 100


def find_member(session: Session, owner_id: str, name: str) -> Member | None:
    return session.scalar(select(Member).where(Member.owner_id == owner_id, Member.name == name))


def add_member(session: Session, owner_id: str, name: str, role: Role) -> Member:
    """A new member; ValueError naming the name if it is empty, too long or taken in the organisation."""
    if not name or len(name) > MAX_NAME:
        raise ValueError(f"member name must be 1-{MAX_NAME} characters, got {len(name)}")
    if find_member(session, owner_id, name) is not None:
        raise ValueError(f"the organisation already has a member named {name!r}")
    member = Member(owner_id=owner_id, name=name, role=role.value)
    session.add(member)
    session.flush()
    return member


def find_or_create_member(session: Session, owner: Owner, name: str, role: Role | None) -> Member:
    """The member `name` of `owner`, created with `role` (default admin) if new; ValueError if it exists with
    another role than the one asked for (roles change through `set_role`, not as a side effect)."""
    member = find_member(session, owner.id, name)
    if member is None:
        return add_member(session, owner.id, name, role or Role.ADMIN)
    if role is not None and member.role != role.value:
        raise ValueError(f"member {name!r} of {owner.name!r} is a {member.role}, not a {role.value}")
    return member


def holds_operators(session: Session, owner_id: str) -> bool:
    """Whether the organisation is the service's operators' own (app/db/operators.py): a member has role operator."""
    query = select(Member.id).where(Member.owner_id == owner_id, Member.role == Role.OPERATOR.value).limit(1)
    return session.scalar(query) is not None


def key_hashes(session: Session, member_id: str) -> list[str]:
    """The hashes of a member's keys: what the API's cache of callers is keyed by (app/api/ttl_cache.py)."""
    return list(session.scalars(select(ApiKey.key_hash).where(ApiKey.member_id == member_id)))


def lock_organisation(session: Session, owner_id: str) -> None:
    """Hold the organisation's row until this transaction ends, so that a check over its members and the change it
    allows take turns with another's (two admins demoting each other): SELECT ... FOR UPDATE on PostgreSQL; on SQLite,
    which has no row locks, a write, which takes the database's one write lock before the check reads."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(update(Owner).where(Owner.id == owner_id).values(name=Owner.name))
    else:
        session.execute(select(Owner.id).where(Owner.id == owner_id).with_for_update())
