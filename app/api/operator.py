"""The operators' routes (scope operator, held only by the service's operators' keys: app/db/operators.py): create
organisations, list them, read one with its usage, give one its own quotas (app/services/organisations.py).

Each change is recorded in two audit trails: the operators' (who did it) and the organisation's (what was done to it).
`python -m app.cli create-key` and `set-quota` do the same with direct database access.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request, status
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.keys import public as key_public
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import OperatorKey
from app.core.settings import Settings
from app.db.access_tables import Owner
from app.db.base import utcnow
from app.db.keys import Caller
from app.schemas.access import KeyWithSecret
from app.schemas.common import Page
from app.schemas.operator import (
    LimitsPublic,
    OrganisationCreate,
    OrganisationCreated,
    OrganisationDetail,
    OrganisationPublic,
    QuotasPublic,
    QuotasUpdate,
    UsageNow,
)
from app.services import organisations, quotas

router = APIRouter(prefix="/v1/operator/organisations", tags=["operator"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "No such organisation"}}
# The API's field -> the column of `owners` it sets (app/services/quotas.py OWN_LIMITS).
QUOTA_COLUMNS = {
    "storage_gb": "quota_storage_gb",
    "active_jobs": "quota_active_jobs",
    "worker_minutes_per_day": "quota_worker_minutes_per_day",
}


def public(settings: Settings, owner: Owner) -> OrganisationPublic:
    limits = quotas.limits(settings, owner)
    return OrganisationPublic(
        id=owner.id,
        name=owner.name,
        created_at=owner.created_at,
        quotas=QuotasPublic(**{field: getattr(owner, column) for field, column in QUOTA_COLUMNS.items()}),
        limits=LimitsPublic(
            storage_bytes=limits.storage_bytes,
            active_jobs=limits.active_jobs,
            worker_minutes_per_day=limits.worker_minutes_per_day,
        ),
    )


def _record(
    session: Session,
    key: Caller,
    request: Request,
    action: str,
    owner: Owner,
    details: dict[str, Any],
) -> None:
    """The event in the operators' trail, and in the organisation's (by the same operator's key)."""
    for trail in (key, replace(key, owner_id=owner.id)):
        audit.record(session, trail, request, action, "organisation", owner.id, {"name": owner.name, **details})


@router.post(
    "",
    response_model=OrganisationCreated,
    status_code=status.HTTP_201_CREATED,
    responses={409: {"description": "An organisation has that name"}, 422: {"description": "A bad name"}},
)
def create_organisation(
    body: OrganisationCreate, session: SessionDep, settings: SettingsDep, key: OperatorKey, request: Request
) -> OrganisationCreated:
    """A new organisation with its first member, an admin, and that admin's key holding every organisation scope: the
    answer's `admin_key.key` is its secret, shown this once, for the operator to hand over. The organisation's quotas
    are the service's QUOTA_* settings until set."""
    owner, row, clear = organisations.create(session, key, body.name, body.admin)
    _record(session, key, request, "organisation.created", owner, {"admin": row.name, "admin_key_prefix": row.prefix})
    session.commit()
    admin_key = KeyWithSecret(**key_public(session, row).model_dump(), key=clear)
    return OrganisationCreated(**public(settings, owner).model_dump(), admin_key=admin_key)


@router.get("", response_model=Page[OrganisationPublic])
def list_organisations(
    session: SessionDep, settings: SettingsDep, key: OperatorKey, limit: Limit = 50, offset: Offset = 0
) -> Page[OrganisationPublic]:
    """The organisations (the operators' own aside), by name, with their own quotas and the limits that apply."""
    query = organisations.customers()
    return paginate(session, query, organisations.BY_NAME, limit, offset, lambda owner: public(settings, owner))


@router.get("/{organisation}", response_model=OrganisationDetail, responses=NOT_FOUND)
def read_organisation(
    organisation: str, session: SessionDep, settings: SettingsDep, key: OperatorKey
) -> OrganisationDetail:
    """One organisation, by id or name, with what it uses now of its quotas (worker minutes since midnight UTC)."""
    owner = organisations.find(session, organisation)
    used = quotas.usage(session, owner.id, utcnow())
    usage = UsageNow(
        storage_bytes=used.storage_bytes,
        active_jobs=used.active_jobs,
        worker_minutes_today=round(used.worker_minutes_today, 2),
    )
    return OrganisationDetail(**public(settings, owner).model_dump(), usage=usage)


@router.put(
    "/{organisation}/quotas",
    response_model=OrganisationPublic,
    responses={**NOT_FOUND, 422: {"description": "A quota missing, of the wrong type or out of bounds"}},
)
def set_quotas(
    organisation: str,
    body: QuotasUpdate,
    session: SessionDep,
    settings: SettingsDep,
    key: OperatorKey,
    request: Request,
) -> OrganisationPublic:
    """The organisation's own quotas, all three (a number, 0 unlimited; null: the service's QUOTA_* setting). They
    apply to the next upload, import or job; a job running when its worker minutes run out stops as at its time
    budget's end."""
    owner = organisations.find(session, organisation)
    changes = {QUOTA_COLUMNS[field]: value for field, value in body.model_dump().items()}
    before = organisations.set_quotas(session, key, owner, changes)
    after = quotas.own_limits(owner)
    if after != before:
        names = {column: field for field, column in QUOTA_COLUMNS.items()}
        details = {"from": {names[c]: v for c, v in before.items()}, "to": {names[c]: v for c, v in after.items()}}
        _record(session, key, request, "organisation.quotas_changed", owner, details)
    session.commit()
    return public(settings, owner)
