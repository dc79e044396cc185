"""GET /v1/me: who the key acts for (organisation, member, role) and what it may do now (the dashboard reads it)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.scopes import AnyKey
from app.core.scopes import parse_scopes
from app.schemas.access import Me

router = APIRouter(prefix="/v1", tags=["access"])


@router.get("/me", response_model=Me)
def read_me(key: AnyKey) -> Me:
    return Me(
        owner=key.owner_name,
        organisation=key.owner_name,
        member=key.member_name,
        role=key.role,
        key_id=key.id,
        key_name=key.name,
        key_prefix=key.prefix,
        scopes=parse_scopes(key.scopes),
        key_scopes=parse_scopes(key.key_scopes),
        expires_at=key.expires_at,
    )
