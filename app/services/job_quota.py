"""How many jobs an owner may have queued or running at once (MAX_ACTIVE_JOBS_PER_KEY), and the organisation's
quotas of active jobs and worker minutes per day (app/services/quotas.py), checked on submission.

A quota, not a request rate: the rate per key is counted by app/api/ratelimit.py before a route runs, this count
comes from the jobs table while the new job is being created.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.db.access_tables import Owner
from app.db.base import utcnow
from app.db.job_rows import ACTIVE_STATES
from app.db.tables import Job
from app.services import quotas
from app.services.errors import TooManyRequests

ACTIVE_JOBS_RETRY_AFTER = 60  # seconds; jobs take minutes, so a client should not poll faster than this


def check_active_jobs(session: Session, settings: Settings, owner_id: str) -> None:
    """TooManyRequests (429 + Retry-After) when the owner already has MAX_ACTIVE_JOBS_PER_KEY jobs queued or running.

    Counted per owner: the keys of one owner share its objects, so a second key cannot double the bound.
    The owner's row is locked until the new job commits (PostgreSQL), so concurrent submits cannot overshoot.
    """
    session.execute(select(Owner.id).where(Owner.id == owner_id).with_for_update())
    try:
        quotas.check_jobs(session, settings, owner_id, utcnow())
    except TooManyRequests:
        session.rollback()  # release the lock now
        raise
    limit = settings.max_active_jobs_per_key
    if limit <= 0:
        return
    active = session.scalar(
        select(func.count()).select_from(Job).where(Job.owner_id == owner_id, Job.status.in_(ACTIVE_STATES))
    )
    assert active is not None  # COUNT(*) always returns a row
    if active >= limit:
        session.rollback()  # release the lock now
        raise TooManyRequests(
            f"{active} jobs are already queued or running (MAX_ACTIVE_JOBS_PER_KEY={limit}); "
            f"wait for one to finish or cancel one",
            ACTIVE_JOBS_RETRY_AFTER,
        )
