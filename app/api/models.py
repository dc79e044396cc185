"""Trained models: list, read, label (name, tags, description), delete. `{model_id}` is also `name@version`,
`name@alias` or `name@latest` on every model route (app/services/model_refs.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from app.api import audit, ttl_cache
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import bad_query, conflict, not_found
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import ModelsWriteKey, ReadKey
from app.db.tables import ModelTag, TrainedModel
from app.schemas.common import Page
from app.schemas.jobs import Objective, Tag
from app.schemas.models import AliasOutcomePublic, ModelDeleted, ModelPublic, ModelUpdate
from app.services import deletion, inference_limits, model_refs, registry

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
        422: {"description": "Invalid name, tag, description, language, licence or beam"},
    },
)
def update_model(
    model_id: str, body: ModelUpdate, session: SessionDep, settings: SettingsDep, key: ModelsWriteKey, request: Request
) -> ModelPublic:
    """Change a model's name, tags, description, languages, licence or default beam: only the fields given change. A
    new `name` makes the model that name's next version (1, 2, ...); renaming removes the aliases of its old name that
    pointed at it (recorded in their history); `null` unregisters it."""
    model = owned_model(session, model_id, key.owner_id)
    given = body.model_fields_set
    if "beam_size" in given and body.beam_size is not None:
        inference_limits.check_default_beam(settings, model.id, model.objective, model.config, body.beam_size)
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
        for field in ("description", "source_language", "target_language", "license", "beam_size"):
            if field in given:
                setattr(model, field, getattr(body, field))
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise conflict(f"name {body.name!r} was being registered by another request; try again") from exc
    ttl_cache.models().forget(model.id)  # its languages (a translation memory is checked against them), its beam
    return ModelPublic.model_validate(model)


@router.delete(
    "/{model_id}",
    response_model=ModelDeleted,
    responses={
        **NOT_FOUND,
        409: {"description": "Aliases point at it, and the request says neither ?aliases=drop nor ?move_aliases_to"},
        422: {"description": "Both options, or a move target that is not another version of the model's name"},
    },
)
def delete_model(
    model_id: str,
    session: SessionDep,
    key: ModelsWriteKey,
    request: Request,
    aliases: Annotated[Literal["drop"] | None, Query(description="`drop`: remove the aliases pointing at it")] = None,
    move_aliases_to: Annotated[
        str | None,
        Query(min_length=1, max_length=100, description="an id or `name@version` of another version of its name"),
    ] = None,
) -> ModelDeleted:
    """Its rows go in one transaction (tags, aliases, evaluations, file translations); its files, exports,
    hypotheses and translated files are deleted by the collector after ARTIFACT_GRACE_SECONDS. While aliases point
    at it the deletion is refused (409 naming them) unless they are dropped or moved; the answer says what became of
    each, and each move is recorded in the alias's history."""
    model = owned_model(session, model_id, key.owner_id)
    target = _move_target(session, model, move_aliases_to, key.owner_id) if move_aliases_to is not None else None
    if target is not None and aliases is not None:
        raise bad_query("aliases", "give ?aliases=drop or ?move_aliases_to, not both")
    details: dict[str, Any] = {"name": model.name, "version": model.version}
    outcomes = deletion.delete_model(session, key, model, aliases == "drop", target)
    details["aliases"] = [f"{o.name}@{o.alias}: {o.action}" for o in outcomes]
    audit.record(session, key, request, "model.deleted", "model", model_id, details)
    session.commit()
    ttl_cache.models().forget(model.id)
    return ModelDeleted(id=model.id, aliases=public_outcomes(outcomes))


def public_outcomes(outcomes: list[deletion.AliasOutcome]) -> list[AliasOutcomePublic]:
    return [
        AliasOutcomePublic(name=o.name, alias=o.alias, action=o.action, model_id=o.model_id, version=o.version)
        for o in outcomes
    ]


def _move_target(session: Session, model: TrainedModel, ref: str, owner_id: str) -> TrainedModel:
    """The version that `?move_aliases_to` names: another version of the model's name, or 422 saying why not."""
    target = model_refs.resolve(session, ref, owner_id)
    if target is None:
        raise bad_query("move_aliases_to", f"model {ref} not found")
    if target.id == model.id:
        raise bad_query("move_aliases_to", f"model {ref} is the one being deleted")
    if model.name is None or target.name != model.name:
        raise bad_query("move_aliases_to", f"model {ref} is not another version of {model.name or 'its name'}")
    return target
