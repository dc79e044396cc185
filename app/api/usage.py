"""The organisation's usage and its quotas (scope read): bytes stored, jobs queued or running, worker minutes today."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import SessionDep, SettingsDep
from app.api.scopes import ReadKey
from app.db.access_tables import Owner
from app.db.base import utcnow
from app.schemas.usage import UsagePublic
from app.services import quotas

router = APIRouter(prefix="/v1/usage", tags=["access"])


@router.get("", response_model=UsagePublic)
def read_usage(session: SessionDep, settings: SettingsDep, key: ReadKey) -> UsagePublic:
    """What the organisation uses now and its limits (0: unlimited); worker minutes count since midnight UTC."""
    owner = session.get(Owner, key.owner_id)
    assert owner is not None  # the key belongs to it
    limits = quotas.limits(settings, owner)
    used = quotas.usage(session, key.owner_id, utcnow())
    return UsagePublic(
        storage_bytes=used.storage_bytes,
        storage_limit_bytes=limits.storage_bytes,
        active_jobs=used.active_jobs,
        active_jobs_limit=limits.active_jobs,
        worker_minutes_today=round(used.worker_minutes_today, 2),
        worker_minutes_per_day_limit=limits.worker_minutes_per_day,
    )
