"""Schemas of the operators' routes (/v1/operator/organisations): organisations, their quotas and usage."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from app.schemas.access import KeyWithSecret, Name
from app.schemas.common import Input, Output
from app.services.quotas import MAX_COUNT, MAX_STORAGE_GB

StorageGb = Annotated[float, Field(ge=0, le=MAX_STORAGE_GB, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class OrganisationCreate(Input):
    """A new organisation and its first member, an admin, whose key the answer shows once."""

    name: Name
    admin: Name | None = Field(None, description="the first member's name; default: named as the organisation")


class QuotasUpdate(Input):
    """The organisation's own quotas, all three: a number (0: unlimited) or null (the service's QUOTA_* setting)."""

    storage_gb: StorageGb | None = Field(description="GiB stored; null: QUOTA_STORAGE_GB")
    active_jobs: Count | None = Field(description="jobs queued or running; null: QUOTA_ACTIVE_JOBS")
    worker_minutes_per_day: Count | None = Field(
        description="worker minutes a UTC day; null: QUOTA_WORKER_MINUTES_PER_DAY"
    )


class QuotasPublic(Output):
    """The organisation's own quotas; null: the service's QUOTA_* setting."""

    storage_gb: float | None
    active_jobs: int | None
    worker_minutes_per_day: int | None


class LimitsPublic(Output):
    """The limits that apply: the organisation's own, else the service's settings; 0 is unlimited."""

    storage_bytes: int
    active_jobs: int
    worker_minutes_per_day: int


class UsageNow(Output):
    storage_bytes: int
    active_jobs: int
    worker_minutes_today: float  # since midnight UTC


class OrganisationPublic(Output):
    id: str
    name: str
    created_at: datetime
    quotas: QuotasPublic
    limits: LimitsPublic


class OrganisationDetail(OrganisationPublic):
    usage: UsageNow


class OrganisationCreated(OrganisationPublic):
    admin_key: KeyWithSecret  # the first admin's key; its secret `key` is shown in this answer only
