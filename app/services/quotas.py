"""Quotas per organisation: bytes stored, jobs queued or running, worker minutes per UTC day.

A limit is the organisation's own (a column of `owners`) or else the service's QUOTA_* setting; 0 is unlimited.
Usage is read from the rows: the sizes recorded for datasets stored by the service (not those read in place from a
URI), models and checkpoints, as stored (an imported model's unpacked files, a filtered dataset's file); the jobs
queued or running; and the worker minutes jobs ran today: each run from started_at to finished_at (a running one's
up to now) times its processes (training.devices x training.nodes), deleted jobs' runs included
(app/db/usage_tables.py).

Checked when work is asked for: storage before an upload, import or filter is stored (413), jobs and minutes before
a job is queued (429). The check that admits bytes is made again once their size is known, under a lock on the
organisation's row held until the row that records them commits (`reserve_storage`), so concurrent uploads take
turns and cannot each pass alone. A running job stops once the organisation's minutes are spent
(`running_seconds_left`, read by the training worker's lease keeper).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.db.access_tables import Owner
from app.db.job_rows import ACTIVE_STATES, RUNNING
from app.db.run_record_tables import JobCheckpoint
from app.db.tables import Dataset, Job, TrainedModel
from app.db.usage_tables import DeletedJobUsage
from app.services.errors import PayloadTooLarge, TooManyRequests

GB = 1024**3  # QUOTA_STORAGE_GB counts binary gigabytes (GiB)
MINUTES_RETRY_AFTER = 600  # seconds: worker minutes come back at midnight UTC, or never sooner than a job ends


@dataclass(frozen=True)
class Limits:
    storage_bytes: int  # 0: unlimited
    active_jobs: int
    worker_minutes_per_day: int


@dataclass(frozen=True)
class Usage:
    storage_bytes: int
    active_jobs: int
    worker_minutes_today: float


def limits(settings: Settings, owner: Owner) -> Limits:
    storage_gb = owner.quota_storage_gb if owner.quota_storage_gb is not None else settings.quota_storage_gb
    jobs = owner.quota_active_jobs if owner.quota_active_jobs is not None else settings.quota_active_jobs
    minutes = owner.quota_worker_minutes_per_day
    return Limits(
        storage_bytes=round(storage_gb * GB),
        active_jobs=jobs,
        worker_minutes_per_day=minutes if minutes is not None else settings.quota_worker_minutes_per_day,
    )


# The organisation's own limits an operator may set (PUT /v1/operator/organisations/{id}/quotas, or python -m app.cli
# set-quota): column -> what it counts, and the most it may be (the columns hold 32-bit integers; a GiB count past
# 2**30 is an exbibyte, and would overflow the bytes it is counted in).
OWN_LIMITS = {
    "quota_storage_gb": "storage in GiB",
    "quota_active_jobs": "jobs queued or running",
    "quota_worker_minutes_per_day": "worker minutes a UTC day",
}
MAX_STORAGE_GB = 2**30
MAX_COUNT = 2**31 - 1
MAX_OWN = {
    "quota_storage_gb": MAX_STORAGE_GB,
    "quota_active_jobs": MAX_COUNT,
    "quota_worker_minutes_per_day": MAX_COUNT,
}


def own_limits(owner: Owner) -> dict[str, float | int | None]:
    """The organisation's own limits by column (None: the service's setting)."""
    return {column: getattr(owner, column) for column in OWN_LIMITS}


def set_limits(owner: Owner, changes: dict[str, float | int | None]) -> None:
    """Give `owner` its own limits (a value; 0 unlimited; None: the service's setting again); ValueError naming a
    column that is not a quota or a value out of 0..MAX_OWN."""
    for column, value in changes.items():
        if column not in OWN_LIMITS:
            raise ValueError(f"{column!r} is not a quota: one of {sorted(OWN_LIMITS)}")
        if value is not None and not 0 <= value <= MAX_OWN[column]:
            raise ValueError(f"{column}={value} is outside 0-{MAX_OWN[column]} (0: unlimited)")
    for column, value in changes.items():
        setattr(owner, column, value)


def set_own_limits(session: Session, organisation: str, changes: dict[str, float | int | None]) -> Owner:
    """Give organisation `organisation` its own limits (set_limits); ValueError naming an organisation that does not
    exist or a limit out of bounds."""
    owner = session.scalar(select(Owner).where(Owner.name == organisation))
    if owner is None:
        raise ValueError(f"no organisation is named {organisation!r}")
    set_limits(owner, changes)
    return owner


def storage_bytes(session: Session, owner_id: str) -> int:
    datasets = select(func.coalesce(func.sum(Dataset.size_bytes), 0)).where(
        Dataset.owner_id == owner_id, Dataset.storage_key != ""
    )
    models = select(func.coalesce(func.sum(TrainedModel.size_bytes), 0)).where(TrainedModel.owner_id == owner_id)
    checkpoints = (
        select(func.coalesce(func.sum(JobCheckpoint.size_bytes), 0))
        .join(Job, Job.id == JobCheckpoint.job_id)
        .where(Job.owner_id == owner_id)
    )
    return sum(int(session.scalar(query) or 0) for query in (datasets, models, checkpoints))


def processes(training_config: dict[str, Any] | None) -> int:
    """How many devices a job's run holds at once: training.devices x training.nodes (1 x 1 when absent)."""
    config = training_config or {}
    return max(1, int(config.get("devices") or 1)) * max(1, int(config.get("nodes") or 1))


def run_minutes(started: datetime, end: datetime, since: datetime, processes: int) -> float:
    """Worker minutes of a run from `started` to `end` on `processes` devices, counted from `since` on."""
    start = max(started, since)
    return max(0.0, (end - start).total_seconds() / 60) * processes


def worker_minutes_today(session: Session, owner_id: str, now: datetime) -> float:
    """Worker minutes the owner's jobs ran since midnight UTC, each run times its devices x nodes: finished ones from
    start to end, running ones up to now, and those of deleted jobs."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    rows = session.execute(
        select(Job.started_at, Job.finished_at, Job.status, Job.training_config).where(
            Job.owner_id == owner_id,
            Job.started_at.is_not(None),
            Job.started_at < now,
            or_(Job.finished_at >= midnight, Job.status == RUNNING),
        )
    )
    total = 0.0
    for started, finished, status, config in rows:
        if started is None:  # excluded by the query; for the type checker
            continue
        end = now if status == RUNNING or finished is None else min(finished, now)
        total += run_minutes(started, end, midnight, processes(config))
    deleted = session.execute(
        select(DeletedJobUsage.started_at, DeletedJobUsage.finished_at, DeletedJobUsage.processes).where(
            DeletedJobUsage.owner_id == owner_id,
            DeletedJobUsage.finished_at >= midnight,
            DeletedJobUsage.started_at < now,
        )
    )
    for started, finished, count in deleted:
        total += run_minutes(started, min(finished, now), midnight, count)
    return total


def running_seconds_left(session: Session, settings: Settings, owner_id: str, now: datetime) -> float | None:
    """Seconds the organisation's running jobs may still run today, all together: the minutes left of its day
    shared by the devices they hold (0 when spent); None without a limit."""
    limit = limits(settings, _owner(session, owner_id)).worker_minutes_per_day
    if limit <= 0:
        return None
    left = limit - worker_minutes_today(session, owner_id, now)
    running = session.scalars(select(Job.training_config).where(Job.owner_id == owner_id, Job.status == RUNNING))
    held = sum(processes(config) for config in running) or 1
    return max(0.0, left * 60 / held)


def active_jobs(session: Session, owner_id: str) -> int:
    count = session.scalar(select(func.count()).where(Job.owner_id == owner_id, Job.status.in_(ACTIVE_STATES)))
    return int(count or 0)


def usage(session: Session, owner_id: str, now: datetime) -> Usage:
    return Usage(
        storage_bytes(session, owner_id), active_jobs(session, owner_id), worker_minutes_today(session, owner_id, now)
    )


def _owner(session: Session, owner_id: str) -> Owner:
    owner = session.get(Owner, owner_id)
    assert owner is not None  # the caller's key belongs to it
    return owner


def check_storage(session: Session, settings: Settings, owner_id: str, adding: int) -> None:
    """PayloadTooLarge when storing `adding` more bytes would pass the organisation's storage quota."""
    limit = limits(settings, _owner(session, owner_id)).storage_bytes
    if limit <= 0:
        return
    used = storage_bytes(session, owner_id)
    if used + adding > limit:
        raise PayloadTooLarge(
            f"storage quota exceeded: {used} bytes stored + {adding} bytes would pass the limit of {limit} bytes "
            f"({limit / GB:g} GiB); delete datasets or models first"
        )


def reserve_storage(session: Session, settings: Settings, owner_id: str, adding: int) -> None:
    """check_storage under a lock on the organisation's row (PostgreSQL; SQLite has one writer at a time), which
    the caller holds until it commits the row that records the `adding` bytes (or rolls back): two concurrent
    uploads take turns, and the second counts the first's bytes."""
    session.execute(select(Owner.id).where(Owner.id == owner_id).with_for_update())
    check_storage(session, settings, owner_id, adding)


def check_room(session: Session, settings: Settings, owner_id: str, what: str) -> None:
    """PayloadTooLarge when the organisation has no storage left at all: for `what`, whose size is known only once
    it is made (a filtered dataset); its size is charged then (reserve_storage)."""
    limit = limits(settings, _owner(session, owner_id)).storage_bytes
    if limit <= 0:
        return
    used = storage_bytes(session, owner_id)
    if used >= limit:
        raise PayloadTooLarge(
            f"storage quota exceeded: {used} bytes stored, the limit is {limit} bytes ({limit / GB:g} GiB), so "
            f"{what} cannot be stored; delete datasets or models first"
        )


def check_jobs(session: Session, settings: Settings, owner_id: str, now: datetime) -> None:
    """TooManyRequests when one more job would pass the active-jobs quota, or today's worker minutes are spent."""
    quota = limits(settings, _owner(session, owner_id))
    if quota.active_jobs > 0:
        active = active_jobs(session, owner_id)
        if active >= quota.active_jobs:
            raise TooManyRequests(
                f"active jobs quota: {active} jobs queued or running, the limit is {quota.active_jobs}; wait for one "
                "to finish or cancel one",
                60,
            )
    if quota.worker_minutes_per_day > 0:
        minutes = worker_minutes_today(session, owner_id, now)
        if minutes >= quota.worker_minutes_per_day:
            raise TooManyRequests(
                f"worker minutes quota: {minutes:.1f} minutes used today (UTC), the limit is "
                f"{quota.worker_minutes_per_day} per day; it starts again at midnight UTC",
                MINUTES_RETRY_AFTER,
            )
