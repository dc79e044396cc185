"""How a route names a model: its id, `name@version` (`my-en-de@3`), `name@alias` (`my-en-de@production`) or
`name@latest` (the highest version). Every model route's `{model_id}` goes through `resolve`, and only there; an
inference worker's INFERENCE_WARM_MODELS, which no caller owns, go through `resolve_any_owner`.

`parse` is pure; `resolve` reads the database each time it meets a name, so an alias that moved is followed by
the very next request (callers may cache what they learn by the resolved id, never by the name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.registry_tables import ModelAlias
from app.db.tables import TrainedModel

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# An alias starts with a letter, so that `name@3` is always a version.
ALIAS_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,63}")
LATEST = "latest"  # not an alias one can set: always the highest version


@dataclass(frozen=True)
class ModelRef:
    """A parsed reference: `model_id`, or `name` with exactly one of `version` and `alias`."""

    model_id: str | None = None
    name: str | None = None
    version: int | None = None
    alias: str | None = None


def parse(ref: str) -> ModelRef | None:
    """The reference `ref` stands for; None when it is neither an id nor a well-formed `name@version|alias`."""
    if "@" not in ref:
        return ModelRef(model_id=ref)
    name, _, selector = ref.partition("@")
    if not NAME_PATTERN.fullmatch(name):
        return None
    if selector.isascii() and selector.isdigit() and len(selector) <= 9:
        return ModelRef(name=name, version=int(selector)) if int(selector) > 0 else None
    if ALIAS_PATTERN.fullmatch(selector):
        return ModelRef(name=name, alias=selector)
    return None


def is_plain_id(ref: str) -> bool:
    return "@" not in ref


def resolve(session: Session, ref: str, owner_id: str) -> TrainedModel | None:
    """The owner's model that `ref` names now, or None (unknown, or someone else's: the caller says 404)."""
    parsed = parse(ref)
    if parsed is None:
        return None
    if parsed.model_id is not None:
        model = session.get(TrainedModel, parsed.model_id)
        return model if model is not None and model.owner_id == owner_id else None
    query = select(TrainedModel).where(TrainedModel.owner_id == owner_id, TrainedModel.name == parsed.name)
    if parsed.version is not None:
        query = query.where(TrainedModel.version == parsed.version)
    elif parsed.alias == LATEST:
        query = query.order_by(TrainedModel.version.desc()).limit(1)
    else:
        query = query.join(ModelAlias, ModelAlias.model_id == TrainedModel.id).where(
            ModelAlias.owner_id == owner_id, ModelAlias.name == parsed.name, ModelAlias.alias == parsed.alias
        )
    return session.scalars(query).first()


def resolve_any_owner(session: Session, ref: str) -> TrainedModel:
    """The model `ref` names for a worker, which serves every organisation: an id, or `name@version|alias` of the
    one organisation that has models under that name. LookupError saying why not (malformed, unknown, the name
    used by several organisations: an id is then needed)."""
    parsed = parse(ref)
    if parsed is None:
        raise LookupError(f"{ref!r} is neither a model id nor name@version, name@alias or name@latest")
    if parsed.model_id is not None:
        model = session.get(TrainedModel, parsed.model_id)
        if model is None:
            raise LookupError(f"no model has the id {ref!r}")
        return model
    owners = session.scalars(select(TrainedModel.owner_id).where(TrainedModel.name == parsed.name).distinct()).all()
    if not owners:
        raise LookupError(f"no model is registered under the name {parsed.name!r}")
    if len(owners) > 1:
        raise LookupError(f"{len(owners)} organisations have models named {parsed.name!r}: name the model by its id")
    model = resolve(session, ref, owners[0])
    if model is None:
        which = f"version {parsed.version}" if parsed.version is not None else f"alias {parsed.alias!r}"
        raise LookupError(f"{parsed.name!r} has no {which}")
    return model
