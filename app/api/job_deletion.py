"""DELETE /v1/jobs/{id}: a stopped job and everything of it; the model it trained stays and keeps serving."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from app.api import audit
from app.api.deps import SessionDep
from app.api.jobs import owned_job
from app.api.scopes import TrainKey
from app.services import deletion

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.delete(
    "/{job_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        404: {"description": "Not found"},
        409: {"description": "Queued, running or cancelling (cancel it first), or a trial of a running sweep"},
    },
)
def delete_job(job_id: str, session: SessionDep, key: TrainKey, request: Request) -> Response:
    """Its metrics, logs, checkpoints, tags and probes go in one transaction; its files in the artifact store are
    deleted by the collector after ARTIFACT_GRACE_SECONDS. A model it trained stays, its `job_deleted` true."""
    job = owned_job(session, job_id, key)
    details = {"name": job.name, "status": job.status, "dataset_id": job.dataset_id}
    deletion.delete_job(session, job)
    audit.record(session, key, request, "job.deleted", "job", job_id, details)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
