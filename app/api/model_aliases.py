"""Aliases of a registered name: `name@alias` points at one version; PUT moves it, DELETE removes it, and every
move is kept (GET .../history). The name is the caller's: another owner's name is 404, as an unknown one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response, status
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep
from app.api.errors import conflict, not_found, unprocessable
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import ModelsWriteKey, ReadKey
from app.db.registry_tables import ModelAlias, ModelAliasEvent
from app.db.tables import TrainedModel
from app.schemas.common import Page
from app.schemas.models import AliasEventPublic, AliasPublic, AliasSet, AliasToVersion
from app.schemas.registry_names import check_alias
from app.services import model_refs, registry

router = APIRouter(prefix="/v1/models", tags=["model aliases"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Not found: no such name or alias of yours"}}


def _bad_alias(alias: str) -> HTTPException | None:
    try:
        check_alias(alias)
    except ValueError as exc:
        return HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, [{"loc": ["path", "alias"], "msg": str(exc), "type": "value_error"}]
        )
    return None


def _owned_name(session: Session, name: str, owner_id: str) -> str:
    if not model_refs.NAME_PATTERN.fullmatch(name) or not registry.name_exists(session, owner_id, name):
        raise not_found("model name", name)
    return name


def _owned_alias(session: Session, name: str, alias: str, owner_id: str) -> ModelAlias:
    row = session.get(ModelAlias, (owner_id, _owned_name(session, name, owner_id), alias))
    if row is None:
        raise not_found("alias", f"{name}@{alias}")
    return row


def _public(row: ModelAlias, version: int | None) -> AliasPublic:
    assert version is not None  # an alias points at a registered model (app/services/registry.py)
    return AliasPublic(
        name=row.name, alias=row.alias, model_id=row.model_id, version=version, updated_at=row.updated_at
    )


@router.get("/{name}/aliases", response_model=list[AliasPublic], responses=NOT_FOUND)
def list_aliases(name: str, session: SessionDep, key: ReadKey) -> list[AliasPublic]:
    _owned_name(session, name, key.owner_id)
    return [_public(row, version) for row, version in registry.aliases_of(session, key.owner_id, name)]


@router.get("/{name}/aliases/{alias}", response_model=AliasPublic, responses=NOT_FOUND)
def read_alias(name: str, alias: str, session: SessionDep, key: ReadKey) -> AliasPublic:
    row = _owned_alias(session, name, alias, key.owner_id)
    return _public(row, session.scalar(select(TrainedModel.version).where(TrainedModel.id == row.model_id)))


@router.put(
    "/{name}/aliases/{alias}",
    response_model=AliasPublic,
    responses={
        **NOT_FOUND,
        400: {"description": "Body is not UTF-8 JSON"},
        409: {"description": "The alias was being set by another request at the same moment: try again"},
        422: {"description": "Invalid alias, or a version or model that is not one of this name's"},
    },
)
def set_alias(
    name: str, alias: str, body: AliasSet, session: SessionDep, key: ModelsWriteKey, request: Request
) -> AliasPublic:
    """Point `name@alias` at one version of the name (`{"version": N}` or `{"model_id": "..."}`, not both), creating the
    alias or moving it; requests through `name@alias` reach the new version from the next one on."""
    _owned_name(session, name, key.owner_id)
    bad = _bad_alias(alias)
    if bad is not None:
        raise bad
    if isinstance(body, AliasToVersion):
        model = model_refs.resolve(session, f"{name}@{body.version}", key.owner_id)
        if model is None:
            raise unprocessable("version", f"version {body.version} of model {name} not found")
    else:
        model = model_refs.resolve(session, body.model_id, key.owner_id) if "@" not in body.model_id else None
        if model is None or model.name != name:
            raise unprocessable("model_id", f"model {body.model_id} is not a version of {name}")
    current = session.get(ModelAlias, (key.owner_id, name, alias))
    before = session.get(TrainedModel, current.model_id) if current is not None else None
    try:
        row = registry.point_alias(session, key, name, alias, model)
        if before is None or before.id != model.id:
            details = {
                "from_version": before.version if before is not None else None,
                "to_version": model.version,
                "from_model_id": before.id if before is not None else None,
                "to_model_id": model.id,
            }
            audit.record(session, key, request, "alias.moved", "alias", f"{name}@{alias}", details)
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise conflict(f"alias {name}@{alias} was being set by another request; try again") from exc
    return _public(row, model.version)


@router.delete("/{name}/aliases/{alias}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
def delete_alias(name: str, alias: str, session: SessionDep, key: ModelsWriteKey, request: Request) -> Response:
    row = _owned_alias(session, name, alias, key.owner_id)
    details = {"model_id": row.model_id}
    registry.remove_alias(session, key, row)
    audit.record(session, key, request, "alias.removed", "alias", f"{name}@{alias}", details)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{name}/aliases/{alias}/history", response_model=Page[AliasEventPublic], responses=NOT_FOUND)
def alias_history(
    name: str, alias: str, session: SessionDep, key: ReadKey, limit: Limit = 50, offset: Offset = 0
) -> Page[AliasEventPublic]:
    """Every move of `name@alias`, newest first, the alias's current state or not (a removed alias keeps it)."""
    _owned_name(session, name, key.owner_id)
    query = select(ModelAliasEvent).where(
        ModelAliasEvent.owner_id == key.owner_id, ModelAliasEvent.name == name, ModelAliasEvent.alias == alias
    )
    return paginate(session, query, (ModelAliasEvent.id.desc(),), limit, offset, AliasEventPublic.model_validate)
