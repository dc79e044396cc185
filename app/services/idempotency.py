"""Idempotency-Key for the routes that create a row (POST /v1/jobs, POST /v1/sweeps): the owner's row made with
the key before is the answer to a replay of the same request, and a Conflict (409) for another body under it."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.services.errors import Conflict

Row = TypeVar("Row", bound=Any)  # a table with owner_id, idempotency_key, request_sha256 and id


def find(session: Session, table: type[Row], owner_id: str, key: str) -> Row | None:
    return session.scalar(select(table).where(table.owner_id == owner_id, table.idempotency_key == key))


def replay(row: Row, digest: str, key: str, kind: str) -> Row:
    """The row made with `key`, if the request is the same (its sha256 `digest`); Conflict otherwise."""
    if row.request_sha256 != digest:
        raise Conflict(f"Idempotency-Key {key!r} was used for a different request ({kind} {row.id})")
    return row
