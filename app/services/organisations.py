"""What the operators' routes do (scope operator, app/api/operator.py): create an organisation with its first admin and
that admin's key, list organisations, and give one its own quotas (app/services/quotas.py).

An operator sees of an organisation its name, id, creation time, quotas and how much of them it uses; nothing it
holds (datasets, jobs, models, members, keys, its audit trail): an operator's key has no organisation scope, so those
routes answer it 403. The operators' own organisation (app/db/operators.py) is not one of the organisations here.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.scopes import ORGANISATION_SCOPES, Role
from app.db.access_tables import ApiKey, Owner
from app.db.keys import Caller, insert_key
from app.db.members import add_member
from app.db.operators import operators_homes
from app.services import quotas
from app.services.errors import Conflict, InvalidField, NotFound

log = logging.getLogger(__name__)
BY_NAME = (Owner.name, Owner.id)


def check_name(name: str, field: str = "name") -> str:
    """An organisation's or member's name as given, or 422 naming it: no whitespace at either end, printable."""
    if name != name.strip():
        raise InvalidField(field, f"{field} {name!r} begins or ends with whitespace")
    if not name.isprintable():
        raise InvalidField(field, f"{field} {name!r} holds a control character")
    return name


def customers() -> Select[Owner]:
    """The organisations an operator manages: all but the operators' own."""
    return select(Owner).where(Owner.id.not_in(operators_homes()))


def find(session: Session, id_or_name: str) -> Owner:
    """The organisation with this id or name; 404 for any other, the operators' own included."""
    owner = session.scalar(customers().where((Owner.id == id_or_name) | (Owner.name == id_or_name)))
    if owner is None:
        raise NotFound("organisation", id_or_name)
    return owner


def create(session: Session, caller: Caller, name: str, admin: str | None) -> tuple[Owner, ApiKey, str]:
    """A new organisation `name` with its first member `admin` (default: named as the organisation), an admin, and
    that member's key holding every organisation scope: (organisation, key row, clear key), flushed, not committed.
    409 naming the name when an organisation has it (the operators' own too)."""
    check_name(name)
    admin = check_name(admin, "admin") if admin is not None else name
    if session.scalar(select(Owner.id).where(Owner.name == name)) is not None:
        raise Conflict(f"an organisation named {name!r} exists")
    owner = Owner(name=name)
    session.add(owner)
    try:
        session.flush()
    except IntegrityError:  # two requests for one name at once: the second's insert fails on the unique name
        session.rollback()
        raise Conflict(f"an organisation named {name!r} exists") from None
    member = add_member(session, owner.id, admin, Role.ADMIN)
    row, clear = insert_key(session, member, admin, ORGANISATION_SCOPES)
    log.info("organisation %s (%s) created with admin key %s by key %s", owner.id, name, row.id, caller.id)
    return owner, row, clear


def set_quotas(session: Session, caller: Caller, owner: Owner, changes: dict[str, Any]) -> dict[str, Any]:
    """Give the organisation its own quotas by column (quotas.OWN_LIMITS; None: the service's setting); returns the
    ones it had. 422 naming a value out of bounds (the schema's bounds are the same)."""
    before = quotas.own_limits(owner)
    try:
        quotas.set_limits(owner, changes)
    except ValueError as exc:
        raise InvalidField("", str(exc)) from exc
    session.flush()
    if quotas.own_limits(owner) != before:
        log.info("organisation %s quotas %s -> %s by key %s", owner.id, before, quotas.own_limits(owner), caller.id)
    return before
