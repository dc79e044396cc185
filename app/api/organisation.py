"""The organisation's own settings: where its datasets may be registered from (read: scope read; change: admin)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.scopes import AdminKey, ReadKey
from app.core.settings import Settings
from app.db.access_tables import Owner
from app.db.keys import Caller
from app.schemas.organisation import UriPrefixesPublic, UriPrefixesUpdate
from app.services import dataset_uris

router = APIRouter(prefix="/v1/organisation", tags=["access"])


def _owner(session: SessionDep, key: Caller) -> Owner:
    owner = session.get(Owner, key.owner_id)
    assert owner is not None  # the key belongs to it
    return owner


def _public(settings: Settings, owner: Owner) -> UriPrefixesPublic:
    allowed = dataset_uris.prefixes(settings, owner)
    return UriPrefixesPublic(
        installation=allowed.installation, organisation=allowed.organisation, effective=allowed.effective
    )


@router.get("/dataset-uri-prefixes", response_model=UriPrefixesPublic)
def read_uri_prefixes(session: SessionDep, settings: SettingsDep, key: ReadKey) -> UriPrefixesPublic:
    """Where the organisation's datasets may be registered from (POST /v1/datasets/register): under a prefix of
    both the service's DATASET_URI_PREFIXES and the organisation's own list, if it has one."""
    return _public(settings, _owner(session, key))


@router.put(
    "/dataset-uri-prefixes",
    response_model=UriPrefixesPublic,
    responses={
        400: {"description": "Body is not UTF-8 JSON"},
        422: {"description": "A malformed prefix, or one outside DATASET_URI_PREFIXES"},
    },
)
def set_uri_prefixes(
    body: UriPrefixesUpdate, session: SessionDep, settings: SettingsDep, key: AdminKey, request: Request
) -> UriPrefixesPublic:
    """Narrow where the organisation's datasets may be registered from: each prefix within DATASET_URI_PREFIXES
    (`[]`: nowhere); `null` gives the organisation all of DATASET_URI_PREFIXES again. Datasets registered before
    stay as they are."""
    owner = _owner(session, key)
    before = dataset_uris.set_own(session, settings, owner, body.prefixes)
    if owner.dataset_uri_prefixes != before:
        details = {"from": before, "to": owner.dataset_uri_prefixes}
        audit.record(session, key, request, "organisation.uri_prefixes_changed", "organisation", owner.id, details)
    session.commit()
    return _public(settings, owner)
