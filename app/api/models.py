"""Trained models: list, read, label (name, tags, description), delete. `{model_id}` is also `name@version`,
`name@alias` or `name@latest` on every model route (app/services/model_refs.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from app.api import audit, ttl_cache
from app.api.deps import SessionDep
from app.api.errors import conflict, not_found
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import ModelsWriteKey, ReadKey
from app.artifacts import ArtifactStoreError, get_store
from app.db.tables import ModelTag, TrainedModel
from app.schemas.common import Page
from app.schemas.jobs import Objective, Tag
from app.schemas.models import ModelPublic, ModelUpdate
from app.services import model_refs, registry
from app.services.evaluations import evaluations_prefix
from app.services.exports import exports_prefix
from app.services.file_translations import translations_prefix

router = APIRouter(prefix="/v1/models", tags=["models"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "Not found: an unknown id, name, version or alias, or someone else's"}
}


def owned_model(session: Session, model_id: str, owner_id: str) -> TrainedModel:
    """The caller's model that `model_id` (an id or a `name@version|alias` reference) names, or 404 naming it."""
    model = model_refs.resolve(session, model_id, owner_id)
    if model is None:
        raise not_found("model", model_id)
    return model


@router.get("", response_model=Page[ModelPublic])
def list_models(
    session: SessionDep,
    key: ReadKey,
    name: Annotated[
        str | None, Query(pattern=f"^{model_refs.NAME_PATTERN.pattern}$", description="versions of this name only")
    ] = None,
    objective: Objective | None = None,
    tag: Annotated[list[Tag] | None, Query(description="repeatable: models carrying every tag given")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[ModelPublic]:
    query = (
        select(TrainedModel)
        .where(TrainedModel.owner_id == key.owner_id)
        .options(selectinload(TrainedModel.tag_rows), selectinload(TrainedModel.alias_rows))
    )
    if name is not None:
        query = query.where(TrainedModel.name == name)
    if objective is not None:
        query = query.where(TrainedModel.objective == objective)
    for wanted in tag or []:
        query = query.where(TrainedModel.tag_rows.any(ModelTag.tag == wanted))
    return paginate(
        session,
        query,
        (TrainedModel.created_at.desc(), TrainedModel.id),
        limit,
        offset,
        ModelPublic.model_validate,
    )


@router.get("/{model_id}", response_model=ModelPublic, responses=NOT_FOUND)
def read_model(model_id: str, session: SessionDep, key: ReadKey) -> ModelPublic:
    return ModelPublic.model_validate(owned_model(session, model_id, key.owner_id))


def _update_action(given: set[str], name: str | None) -> str:
    if "name" not in given:
        return "model.updated"
    return "model.registered" if name is not None else "model.unregistered"


@router.patch(
    "/{model_id}",
    response_model=ModelPublic,
    responses={
        **NOT_FOUND,
        400: {"description": "Body is not UTF-8 JSON"},
        409: {"description": "The name was being registered by another request at the same moment: try again"},
        422: {"description": "Invalid name, tag, description, language or licence"},
    },
)
def update_model(
    model_id: str, body: ModelUpdate, session: SessionDep, key: ModelsWriteKey, request: Request
) -> ModelPublic:
    """Change a model's name, tags, description, languages or licence: only the fields given change. A new `name` makes
    the model that name's next version (1, 2, ...); renaming removes the aliases of its old name that pointed at
    it (recorded in their history); `null` unregisters it."""
    model = owned_model(session, model_id, key.owner_id)
    given = body.model_fields_set
    before = {"name": model.name, "version": model.version}
    try:
        if "name" in given:
            registry.register(session, key, model, body.name)
        details: dict[str, Any] = {"fields": sorted(given)}
        if "name" in given:
            details.update({"from": before, "to": {"name": model.name, "version": model.version}})
        audit.record(session, key, request, _update_action(given, model.name), "model", model.id, details)
        if "tags" in given:
            registry.set_tags(session, model, body.tags or [])
        for field in ("description", "source_language", "target_language", "license"):
            if field in given:
                setattr(model, field, getattr(body, field))
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise conflict(f"name {body.name!r} was being registered by another request; try again") from exc
    return ModelPublic.model_validate(model)


@router.delete(
    "/{model_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={**NOT_FOUND, 503: {"description": "Artifact store unavailable"}},
)
def delete_model(model_id: str, session: SessionDep, key: ModelsWriteKey, request: Request) -> Response:
    """The files go first, then the row: a store that cannot be reached leaves the model whole (503, retry), and a
    retry after a failed commit finds the files already gone, which is fine. Aliases pointing at it go with it,
    each recorded in its history."""
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
    registry.drop_aliases(session, key, model)
    session.delete(model)
    details = {"name": model.name, "version": model.version}
    audit.record(session, key, request, "model.deleted", "model", model_id, details)
    session.commit()
    ttl_cache.models().forget(model.id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
