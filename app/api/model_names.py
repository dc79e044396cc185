"""DELETE /v1/models/names/{name}: a registered name with its versions and aliases."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request

from app.api import audit, ttl_cache
from app.api.deps import SessionDep
from app.api.errors import not_found
from app.api.models import public_outcomes
from app.api.scopes import ModelsWriteKey
from app.schemas.models import NameDeleted, VersionDeleted
from app.services import deletion, model_refs, registry

router = APIRouter(prefix="/v1/models/names", tags=["model aliases"])


@router.delete(
    "/{name}",
    response_model=NameDeleted,
    responses={
        404: {"description": "Not found: no such name of yours"},
        409: {"description": "The name has versions and the request did not say ?versions=delete"},
    },
)
def delete_name(
    name: str,
    session: SessionDep,
    key: ModelsWriteKey,
    request: Request,
    versions: Annotated[
        Literal["delete"] | None, Query(description="`delete`: delete every version with the name")
    ] = None,
) -> NameDeleted:
    """The name's versions (their files reclaimed by the collector) and aliases (each removal recorded in its
    history) go with it; the name is free again, and a model registered under it later is its version 1."""
    if not model_refs.NAME_PATTERN.fullmatch(name) or not registry.name_exists(session, key.owner_id, name):
        raise not_found("model name", name)
    models, aliases = deletion.delete_name(session, key, name, versions == "delete")
    details = {"versions": [m.version for m in models], "aliases": [f"{a.name}@{a.alias}" for a in aliases]}
    audit.record(session, key, request, "name.deleted", "name", name, details)
    session.commit()
    for model in models:
        ttl_cache.models().forget(model.id)
    return NameDeleted(
        name=name,
        versions=[VersionDeleted(id=m.id, version=m.version) for m in models],
        aliases=public_outcomes(aliases),
    )
