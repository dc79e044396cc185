"""The service's operators: members with role `operator`, whose keys hold scope `operator` and nothing else.

They create organisations and set their quotas over the API (app/api/operator.py). They are members of an
organisation of their own (OPERATORS_HOME unless told otherwise) that holds no one else: a customer's organisation
never has an operator, so no organisation's key can hold the scope (docs/security.md), and the operators' routes
never list their own organisation. Their first key comes from the command line, with direct database access
(`python -m app.cli create-operator-key NAME`), as an organisation's first admin key does.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.core.scopes import Role, Scope
from app.db.access_tables import ApiKey, Member, Owner
from app.db.keys import MAX_NAME, insert_key
from app.db.members import find_or_create_member

OPERATORS_HOME = "operators"


def operators_homes() -> Select[str]:
    """The ids of the organisations that hold operators (one, unless a second was named with --home)."""
    return select(Member.owner_id).where(Member.role == Role.OPERATOR.value)


def create_operator_key(
    session: Session,
    name: str,
    member_name: str | None = None,
    home: str = OPERATORS_HOME,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """A key holding scope `operator` for operator `member_name` (default: `name`) of organisation `home`, creating
    either if new. ValueError when `home` is a customer's organisation (it has members who are not operators), or the
    member exists there with another role. Returns (row, clear key)."""
    if not home or len(home) > MAX_NAME:
        raise ValueError(f"organisation name must be 1-{MAX_NAME} characters, got {len(home)}")
    owner = session.scalar(select(Owner).where(Owner.name == home))
    if owner is None:
        owner = Owner(name=home)
        session.add(owner)
        session.flush()
    else:
        others = session.scalars(
            select(Member.name).where(Member.owner_id == owner.id, Member.role != Role.OPERATOR.value).limit(3)
        ).all()
        if others:
            raise ValueError(
                f"organisation {home!r} has members who are not operators ({', '.join(others)}): operators belong to "
                "an organisation of their own; name another with --home"
            )
    member = find_or_create_member(session, owner, member_name or name, Role.OPERATOR)
    return insert_key(session, member, name, [Scope.OPERATOR], expires_at)
