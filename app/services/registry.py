"""The model registry's writes: registering a model under a name (its next version) and moving aliases, each
move recorded in model_alias_events and reported to the owner's webhooks (model.registered, model.alias_moved, sent
once the caller commits). Routes call these inside their session and commit.

Invariants: a model has a name and a version or neither; an alias of `name` points at a model registered under
`name` (renaming or deleting a model removes its aliases, recording that); versions of a name only grow.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.scopes import ROLE_SCOPES, Scope, sorted_scopes
from app.db.access_tables import ApiKey, Member
from app.db.base import utcnow
from app.db.keys import Caller, caller_of
from app.db.registry_tables import ModelAlias, ModelAliasEvent, ModelName
from app.db.tables import ModelTag, TrainedModel
from app.services import webhooks


def next_version(session: Session, owner_id: str, name: str) -> int:
    """The owner's next version number of `name` (1 for a new name). The row is locked until commit, so two
    registrations under one name take turns; two first ones may collide (IntegrityError: the caller retries)."""
    row = session.get(ModelName, (owner_id, name), with_for_update=True)
    if row is None:
        row = ModelName(owner_id=owner_id, name=name, last_version=0)
        session.add(row)
    row.last_version += 1
    session.flush()
    return row.last_version


def _record(
    session: Session, caller: Caller, name: str, alias: str, before: TrainedModel | None, after: TrainedModel | None
) -> None:
    session.add(
        ModelAliasEvent(
            owner_id=caller.owner_id,
            name=name,
            alias=alias,
            from_model_id=before.id if before else None,
            from_version=before.version if before else None,
            to_model_id=after.id if after else None,
            to_version=after.version if after else None,
            key_id=caller.id,
            key_prefix=caller.prefix,
            created_at=utcnow(),
        )
    )
    webhooks.emit_alias_moved(session, caller.owner_id, name, alias, before, after)


def drop_aliases(session: Session, caller: Caller, model: TrainedModel) -> None:
    """Remove every alias pointing at `model`, recording each (before a rename or a deletion)."""
    for row in list(model.alias_rows):
        _record(session, caller, row.name, row.alias, model, None)
        model.alias_rows.remove(row)
    session.flush()


def register(session: Session, caller: Caller, model: TrainedModel, name: str | None) -> None:
    """Publish `model` as the next version of `name` (None: unregister it); the same name again changes nothing."""
    if name == model.name:
        return
    drop_aliases(session, caller, model)
    model.name, model.version = None, None
    session.flush()
    if name is not None:
        model.version = next_version(session, model.owner_id, name)
        model.name = name
        webhooks.emit_model_registered(session, model)


def registering_caller(session: Session, owner_id: str, key_id: str, key_prefix: str, did: str) -> Caller | str:
    """The key that asked for a registration later (created a sweep, submitted a job with register_as), as it is
    now, if it may still register models (active, holding models:write that its member's role allows); else why
    not. Something registered on a key's behalf is registered as that key, never as more."""
    key = f"API key {key_prefix}..., which {did},"
    row = session.get(ApiKey, key_id)
    member = session.get(Member, row.member_id) if row is not None else None
    if row is None or member is None or row.owner_id != owner_id or member.owner_id != owner_id:
        return f"{key} or its member is no longer in the organisation"
    caller = caller_of(session, row)
    if caller.revoked_at is not None:
        return f"{key} was revoked at {caller.revoked_at.isoformat()}"
    if caller.expired(utcnow()):
        assert caller.expires_at is not None
        return f"{key} expired at {caller.expires_at.isoformat()}"
    if Scope.MODELS_WRITE not in caller.key_scopes:
        return f"{key} lacks scope 'models:write'; its scopes: {', '.join(sorted_scopes(caller.key_scopes))}"
    if Scope.MODELS_WRITE not in caller.scopes:
        allowed = ", ".join(sorted_scopes(ROLE_SCOPES[caller.role]))
        return f"{key} belongs to member {member.name!r}, now a {caller.role.value}, whose keys may use only: {allowed}"
    return caller


def set_tags(session: Session, model: TrainedModel, tags: list[str]) -> None:
    model.tag_rows.clear()
    session.flush()  # the old rows go before the new ones come: a kept tag has the same primary key
    model.tag_rows.extend(ModelTag(tag=tag, position=i) for i, tag in enumerate(tags))


def point_alias(session: Session, caller: Caller, name: str, alias: str, model: TrainedModel) -> ModelAlias:
    """Point `name@alias` at `model` (registered under `name`), creating or moving it; a move is recorded."""
    assert model.name == name and model.owner_id == caller.owner_id
    row = session.get(ModelAlias, (caller.owner_id, name, alias), with_for_update=True)
    if row is not None and row.model_id == model.id:
        return row
    before = session.get(TrainedModel, row.model_id) if row is not None else None
    if row is None:
        row = ModelAlias(owner_id=caller.owner_id, name=name, alias=alias, model_id=model.id, updated_at=utcnow())
        session.add(row)
    else:
        row.model_id, row.updated_at = model.id, utcnow()
    _record(session, caller, name, alias, before, model)
    session.flush()
    return row


def remove_alias(session: Session, caller: Caller, row: ModelAlias) -> None:
    _record(session, caller, row.name, row.alias, session.get(TrainedModel, row.model_id), None)
    session.delete(row)
    session.flush()


def aliases_of(session: Session, owner_id: str, name: str) -> list[tuple[ModelAlias, int]]:
    """The aliases of the owner's `name`, by alias, each with the version it points at."""
    query = (
        select(ModelAlias, TrainedModel.version)
        .join(TrainedModel, TrainedModel.id == ModelAlias.model_id)
        .where(ModelAlias.owner_id == owner_id, ModelAlias.name == name)
        .order_by(ModelAlias.alias)
    )
    return [(row, version) for row, version in session.execute(query) if version is not None]


def name_exists(session: Session, owner_id: str, name: str) -> bool:
    """Whether the owner has ever registered a model under `name`."""
    return session.get(ModelName, (owner_id, name)) is not None
