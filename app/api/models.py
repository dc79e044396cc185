"""Trained models: list, read, delete."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api import ttl_cache
from app.api.deps import CurrentKey, SessionDep
from app.api.errors import not_found
from app.api.pagination import Limit, Offset, paginate
from app.artifacts import ArtifactStoreError, get_store
from app.db.models import TrainedModel
from app.model_evaluations import evaluations_prefix
from app.model_exports import exports_prefix
from app.model_file_translations import translations_prefix
from app.schemas.common import Page
from app.schemas.models import ModelPublic

router = APIRouter(prefix="/v1/models", tags=["models"])


def owned_model(session: Session, model_id: str, owner_id: str) -> TrainedModel:
    model = session.get(TrainedModel, model_id)
    if model is None or model.owner_id != owner_id:
        raise not_found("model", model_id)
    return model


@router.get("", response_model=Page[ModelPublic])
def list_models(session: SessionDep, key: CurrentKey, limit: Limit = 50, offset: Offset = 0) -> Page[ModelPublic]:
    return paginate(
        session,
        select(TrainedModel).where(TrainedModel.owner_id == key.owner_id),
        (TrainedModel.created_at.desc(), TrainedModel.id),
        limit,
        offset,
        ModelPublic.model_validate,
    )


@router.get("/{model_id}", response_model=ModelPublic, responses={404: {"description": "Not found"}})
def read_model(model_id: str, session: SessionDep, key: CurrentKey) -> ModelPublic:
    return ModelPublic.model_validate(owned_model(session, model_id, key.owner_id))


@router.delete(
    "/{model_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: {"description": "Not found"}, 503: {"description": "Artifact store unavailable"}},
)
def delete_model(model_id: str, session: SessionDep, key: CurrentKey) -> Response:
    """The files go first, then the row: a store that cannot be reached leaves the model whole (503, retry), and a
    retry after a failed commit finds the files already gone, which is fine."""
    model = owned_model(session, model_id, key.owner_id)
    try:
        get_store().delete(exports_prefix(model.id))  # downloads built from it first: never left without a model
        get_store().delete(evaluations_prefix(model.id))  # hypotheses of its evaluations (rows: ON DELETE CASCADE)
        get_store().delete(translations_prefix(model.id))  # files translated with it, likewise
        get_store().delete(model.storage_key)
    except ArtifactStoreError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"model {model_id} was not deleted: the artifact store is unavailable ({type(exc).__name__}); try again",
            headers={"Retry-After": "10"},
        ) from exc
    session.delete(model)
    session.commit()
    ttl_cache.models().forget(model_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
