"""Where an organisation's datasets may be read in place from (POST /v1/datasets/register).

The installation's DATASET_URI_PREFIXES is the ceiling: the service reads nothing outside it, with its own
credentials, for anyone. An organisation's admins may narrow it for their organisation
(PUT /v1/organisation/dataset-uri-prefixes, stored in `owners.dataset_uri_prefixes`); until they do, the organisation
has all of it. A URI is read only when it lies, segment by segment (app/core/object_uris.py), under a prefix of both
lists: another organisation's list never widens this one's, and a narrowed installation list narrows every
organisation's at once, whatever it stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.object_uris import ObjectPath, overlaps, parse_prefix, parse_uri
from app.core.settings import Settings
from app.db.access_tables import Owner
from app.services.errors import InvalidField

MAX_PREFIXES = 50  # of an organisation's own list


@dataclass(frozen=True)
class UriPrefixes:
    installation: list[str]  # DATASET_URI_PREFIXES
    organisation: list[str] | None  # the organisation's own list; None: all of the installation's
    effective: list[str]  # what both allow: the URIs under these may be registered


def _installation(settings: Settings) -> list[ObjectPath]:
    return [parse_prefix(prefix) for prefix in settings.dataset_uri_prefixes]  # checked when the settings loaded


def prefixes(settings: Settings, owner: Owner) -> UriPrefixes:
    """The installation's prefixes, the organisation's own, and what both allow, as canonical text."""
    installation = _installation(settings)
    own = owner.dataset_uri_prefixes
    effective = installation if own is None else overlaps(installation, [parse_prefix(p) for p in own])
    return UriPrefixes([str(p) for p in installation], None if own is None else list(own), [str(p) for p in effective])


def _where(allowed: UriPrefixes) -> str:
    if not allowed.installation:
        return "none (DATASET_URI_PREFIXES is empty)"
    if allowed.organisation is None:
        return ", ".join(allowed.installation)
    if not allowed.effective:
        own = ", ".join(allowed.organisation) or "empty"
        return f"none (the organisation's own list, {own}, allows nothing within DATASET_URI_PREFIXES)"
    return ", ".join(allowed.effective) + " (the organisation's own list within DATASET_URI_PREFIXES)"


def check_readable(settings: Settings, owner: Owner, uri: str) -> None:
    """InvalidField at `uri` naming it, and why, unless it names one object under a prefix of both the installation's
    list and the organisation's."""
    try:
        target = parse_uri(uri)
    except ValueError as exc:
        raise InvalidField("uri", str(exc)) from exc
    allowed = prefixes(settings, owner)
    if not any(parse_prefix(prefix).covers(target) for prefix in allowed.effective):
        raise InvalidField("uri", f"the service may not read {uri!r}: it reads only URIs under {_where(allowed)}")


def set_own(session: Session, settings: Settings, owner: Owner, given: list[str] | None) -> list[str] | None:
    """Give the organisation its own list (None: all of DATASET_URI_PREFIXES again), each prefix within the
    installation's; InvalidField at `prefixes.N` naming one that is malformed or outside. Returns the list as it was;
    the caller commits."""
    before = owner.dataset_uri_prefixes
    if given is None:
        owner.dataset_uri_prefixes = None
        session.flush()
        return before
    if len(given) > MAX_PREFIXES:
        raise InvalidField("prefixes", f"{len(given)} prefixes: an organisation may have at most {MAX_PREFIXES}")
    installation = _installation(settings)
    ceiling = ", ".join(str(p) for p in installation) or "none: DATASET_URI_PREFIXES is empty"
    own: list[str] = []
    for n, text in enumerate(given):
        try:
            prefix = parse_prefix(text)
        except ValueError as exc:
            raise InvalidField(f"prefixes.{n}", str(exc)) from exc
        if not any(allowed.covers(prefix) for allowed in installation):
            raise InvalidField(
                f"prefixes.{n}",
                f"prefix {text!r} is not within the service's DATASET_URI_PREFIXES ({ceiling}): an organisation may "
                "only narrow that list",
            )
        own.append(str(prefix))
    owner.dataset_uri_prefixes = list(dict.fromkeys(own))
    session.flush()
    return before
