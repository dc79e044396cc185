"""An organisation's usage and quotas (GET /v1/usage)."""

from __future__ import annotations

from app.schemas.common import Output


class UsagePublic(Output):
    """Each limit is 0 when unlimited."""

    storage_bytes: int
    storage_limit_bytes: int
    active_jobs: int
    active_jobs_limit: int
    worker_minutes_today: float
    worker_minutes_per_day_limit: int
