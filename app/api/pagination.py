"""`limit`/`offset` pagination with a total, shared by every list route."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Query
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.schemas.common import Page

T = TypeVar("T")
Limit = Annotated[int, Query(ge=1, le=500)]
Offset = Annotated[int, Query(ge=0, le=2**31 - 1)]  # PostgreSQL refuses an OFFSET past 64 bits


def paginate(
    session: Session,
    query: Select[Any],
    order_by: tuple[Any, ...],
    limit: int,
    offset: int,
    convert: Callable[[Any], T],
) -> Page[T]:
    total = session.scalar(select(func.count()).select_from(query.subquery()))
    assert total is not None  # COUNT(*) always returns a row
    rows = session.scalars(query.order_by(*order_by).limit(limit).offset(offset))
    return Page(data=[convert(row) for row in rows], total=total, limit=limit, offset=offset)
