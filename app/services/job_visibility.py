"""Which of its organisation's jobs a key sees: all of them with scope read; with scope train alone, the jobs it
submitted (`jobs.key_id`; a sweep's trials are its sweep's key's), so that a key made to submit jobs can follow them
without reading the rest of the organisation's work. Every job route, reading or changing one, finds its job here:
one the key may not see is 404, as another organisation's is (docs/security.md).
"""

from __future__ import annotations

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.core.scopes import Scope
from app.db.keys import Caller
from app.db.tables import Job
from app.services.errors import NotFound


def sees_every_job(caller: Caller) -> bool:
    """Whether the key sees every job of its organisation (scope read), not only those it submitted."""
    return Scope.READ in caller.scopes


def may_see(caller: Caller, job: Job) -> bool:
    return job.owner_id == caller.owner_id and (sees_every_job(caller) or job.key_id == caller.id)


def visible_jobs(caller: Caller) -> Select[Job]:
    """The jobs the key may see, as a query to filter and order further."""
    query = select(Job).where(Job.owner_id == caller.owner_id)
    return query if sees_every_job(caller) else query.where(Job.key_id == caller.id)


def visible_job(session: Session, job_id: str, caller: Caller) -> Job:
    """The job, if the key may see it; NotFound (404) otherwise, as for an unknown id."""
    job = session.get(Job, job_id)
    if job is None or not may_see(caller, job):
        raise NotFound("job", job_id)
    return job
