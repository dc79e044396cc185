"""Glossaries: an organisation's terms for a language pair (create from entries or CSV, list, read, delete).
Reading needs `read`, creating and deleting `models:write`; another organisation's glossary is 404, as an unknown
one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep
from app.api.errors import not_found
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import ModelsWriteKey, ReadKey
from app.db.glossary_tables import Glossary
from app.schemas.common import Page
from app.schemas.glossaries import GlossaryCreate, GlossaryEntry, GlossaryPublic, GlossarySummary
from app.services import glossaries

router = APIRouter(prefix="/v1/glossaries", tags=["glossaries"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Not found"}}
REFUSED: dict[int | str, dict[str, Any]] = {
    400: {"description": "Body is not UTF-8 JSON"},
    422: {"description": "No entry, an empty or overlong term, a CSV row not of two columns, conflicting entries"},
}


def owned_glossary(session: Session, glossary_id: str, owner_id: str) -> Glossary:
    glossary = session.get(Glossary, glossary_id)
    if glossary is None or glossary.owner_id != owner_id:
        raise not_found("glossary", glossary_id)
    return glossary


def summary(glossary: Glossary) -> GlossarySummary:
    return GlossarySummary(
        id=glossary.id,
        name=glossary.name,
        source_language=glossary.source_language,
        target_language=glossary.target_language,
        case_sensitive=glossary.case_sensitive,
        terms=len(glossary.entries),
        created_at=glossary.created_at,
    )


def public(glossary: Glossary) -> GlossaryPublic:
    entries = [GlossaryEntry(source=s, target=t) for s, t in glossary.entries]
    return GlossaryPublic(**summary(glossary).model_dump(), entries=entries)


@router.post("", response_model=GlossaryPublic, status_code=status.HTTP_201_CREATED, responses=REFUSED)
def create_glossary(body: GlossaryCreate, session: SessionDep, key: ModelsWriteKey, request: Request) -> GlossaryPublic:
    """A glossary from `entries` or `csv`; the same entry twice is kept once."""
    glossary = glossaries.create(session, key.owner_id, body)
    details = {
        "name": body.name,
        "pair": f"{body.source_language}-{body.target_language}",
        "terms": len(glossary.entries),
    }
    audit.record(session, key, request, "glossary.created", "glossary", Glossary, details)
    session.commit()
    return public(glossary)


@router.get("", response_model=Page[GlossarySummary])
def list_glossaries(session: SessionDep, key: ReadKey, limit: Limit = 50, offset: Offset = 0) -> Page[GlossarySummary]:
    query = select(Glossary).where(Glossary.owner_id == key.owner_id)
    return paginate(session, query, (Glossary.created_at.desc(), Glossary.id), limit, offset, summary)


@router.get("/{glossary_id}", response_model=GlossaryPublic, responses=NOT_FOUND)
def read_glossary(glossary_id: str, session: SessionDep, key: ReadKey) -> GlossaryPublic:
    return public(owned_glossary(session, glossary_id, key.owner_id))


@router.delete("/{glossary_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
def delete_glossary(glossary_id: str, session: SessionDep, key: ModelsWriteKey, request: Request) -> Response:
    glossary = owned_glossary(session, glossary_id, key.owner_id)
    session.delete(glossary)
    audit.record(session, key, request, "glossary.deleted", "glossary", glossary_id, {"name": glossary.name})
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
