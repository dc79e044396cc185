"""Members of an organisation over the API (scope admin): add one, list them, change a role. A role lowered takes
effect on the member's keys at their next request (app/core/scopes.py); the organisation keeps at least one admin
(counted under a lock on its row), and no key changes its own member's role."""

from __future__ import annotations

import logging

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.core.scopes import Role
from app.db.access_tables import Member
from app.db.keys import Caller
from app.db.members import add_member, lock_organisation
from app.services.errors import Conflict, NotFound

log = logging.getLogger(__name__)


def add(session: Session, caller: Caller, name: str, role: Role) -> Member:
    try:
        member = add_member(session, caller.owner_id, name, role)
    except ValueError as exc:  # the name is taken
        raise Conflict(str(exc)) from exc
    log.info("member %s (%s) added by key %s", name, role.value, caller.id)
    return member


def listed(caller: Caller) -> Select[Member]:
    """The organisation's members (order them by name, then id)."""
    return select(Member).where(Member.owner_id == caller.owner_id)


def get(session: Session, caller: Caller, member_id: str) -> Member:
    member = session.get(Member, member_id)
    if member is None or member.owner_id != caller.owner_id:
        raise NotFound("member", member_id)
    return member


def set_role(session: Session, caller: Caller, member_id: str, role: Role) -> tuple[Member, str]:
    """Change a member's role; returns (member, the role it had). 409 for the caller's own member (another admin
    changes it: no key locks its own organisation out by mistake) and for the organisation's last admin losing the
    role. The organisation's row is locked first, so that two changes take turns: each counts the admins the other
    left (two admins demoting each other at once: the second is refused)."""
    lock_organisation(session, caller.owner_id)
    member = session.get(Member, member_id, populate_existing=True)  # as it is now that the lock is held
    if member is None or member.owner_id != caller.owner_id:
        raise NotFound("member", member_id)
    before = member.role
    if member.id == caller.member_id:
        raise Conflict(
            f"member {member.name!r} is the caller's own: another admin of the organisation changes its role"
        )
    if member.role == Role.ADMIN and role != Role.ADMIN:
        admins = session.scalar(
            select(func.count()).where(Member.owner_id == caller.owner_id, Member.role == Role.ADMIN.value)
        )
        if admins == 1:
            raise Conflict(f"member {member.name!r} is the organisation's last admin: make another admin first")
    log.info("member %s: role %s -> %s by key %s", member.name, member.role, role.value, caller.id)
    member.role = role.value
    session.flush()
    return member, before
