"""Corrections to a model's translations (send needs `inference`, list `read`), and adapting the model to them
(`train`, and `models:write` to publish the new version): app/services/corrections.py."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request, Response, status
from sqlalchemy import select

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import not_found
from app.api.jobs import dispatch
from app.api.models import owned_model
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import InferenceKey, ReadKey, TrainKey
from app.db.correction_tables import Correction
from app.schemas.common import Page
from app.schemas.corrections import AdaptationCreate, AdaptationPublic, CorrectionCreate, CorrectionPublic
from app.services import corrections

router = APIRouter(prefix="/v1/models", tags=["corrections"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Not found: an unknown model, or someone else's"}}


def public(row: Correction) -> CorrectionPublic:
    return CorrectionPublic.model_validate(row)


@router.post(
    "/{model_id}/corrections",
    response_model=CorrectionPublic,
    status_code=status.HTTP_201_CREATED,
    responses={**NOT_FOUND, 422: {"description": "An empty side, a line break, a model that does not translate"}},
)
def create_correction(
    model_id: str, body: CorrectionCreate, session: SessionDep, key: InferenceKey, request: Request
) -> CorrectionPublic:
    """A segment as the model translated it and as it should read; an adaptation learns from it."""
    model = owned_model(session, model_id, key.owner_id)
    row = corrections.create(session, key, model, body)
    audit.record(session, key, request, "correction.added", "correction", Correction, {"model_id": model.id})
    session.commit()
    return public(row)


@router.get("/{model_id}/corrections", response_model=Page[CorrectionPublic], responses=NOT_FOUND)
def list_corrections(
    model_id: str, session: SessionDep, key: ReadKey, limit: Limit = 50, offset: Offset = 0
) -> Page[CorrectionPublic]:
    """The model's own corrections, newest first (an adaptation also gathers its ancestors')."""
    model = owned_model(session, model_id, key.owner_id)
    query = select(Correction).where(Correction.model_id == model.id)
    return paginate(session, query, (Correction.created_at.desc(), Correction.id), limit, offset, public)


@router.delete("/{model_id}/corrections/{correction_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
def delete_correction(
    model_id: str, correction_id: str, session: SessionDep, key: InferenceKey, request: Request
) -> Response:
    """A correction sent by mistake; an adaptation made before keeps what it learnt."""
    model = owned_model(session, model_id, key.owner_id)
    row = session.get(Correction, correction_id)
    if row is None or row.model_id != model.id:
        raise not_found("correction", correction_id)
    session.delete(row)
    audit.record(session, key, request, "correction.deleted", "correction", correction_id, {"model_id": model.id})
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{model_id}/adaptations",
    response_model=AdaptationPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        **NOT_FOUND,
        403: {"description": "The key may not publish models (models:write)"},
        422: {"description": "No corrections, no registry name, no original data to mix in, an invalid job"},
    },
)
def adapt_model(
    model_id: str,
    body: AdaptationCreate,
    session: SessionDep,
    settings: SettingsDep,
    key: TrainKey,
    background: BackgroundTasks,
    request: Request,
) -> AdaptationPublic:
    """A job fine-tuning the model on its corrections mixed with its original data; its model is the next version
    of the model's name."""
    model = owned_model(session, model_id, key.owner_id)
    job, dataset, gathered, models = corrections.adapt(session, settings, key, model, body)
    details = {"model_id": model.id, "job_id": job.id, "dataset_id": dataset.id, "corrections": len(gathered)}
    audit.record(session, key, request, "adaptation.requested", "job", job.id, details)
    session.commit()
    background.add_task(dispatch, job.id)
    assert job.register_as is not None and job.mix_dataset_id is not None  # adapt() sets both
    return AdaptationPublic(
        job_id=job.id,
        dataset_id=dataset.id,
        corrections=len(gathered),
        models=models,
        register_as=job.register_as,
        mix_dataset_id=job.mix_dataset_id,
    )
