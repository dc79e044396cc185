"""Injected dependencies: a database session per request and the caller's API key (authenticated; app/api/scopes.py
says what it may do)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.api import ttl_cache
from app.core import logs
from app.core.security import hash_key
from app.core.settings import Settings, get_settings
from app.db.base import utcnow
from app.db.keys import Caller, identify
from app.db.session import get_sessionmaker


async def get_session() -> AsyncIterator[Session]:
    """A session for the request. It connects on its first query, from the route's thread; creating it needs no
    thread of its own, and closing it needs one only when it still holds a connection."""
    session = get_sessionmaker()()
    try:
        yield session
    finally:
        if session.in_transaction():
            await run_in_threadpool(session.close)  # a rollback and the connection back to the pool
        else:
            session.close()


SessionDep = Annotated[Session, Depends(get_session)]


async def current_settings() -> Settings:
    return get_settings()  # async: a sync dependency would cost every request a trip through the thread pool


SettingsDep = Annotated[Settings, Depends(current_settings)]

_bearer = HTTPBearer(
    auto_error=False,
    description="An API key (`POST /v1/keys`, or `python -m app.cli create-key NAME` for an organisation's first "
    "admin). Each operation lists the scope it needs (docs/security.md); an empty list: any valid key.",
)
UNAUTHORIZED = {"WWW-Authenticate": "Bearer"}


def _refuse_inactive(caller: Caller) -> None:
    """401 naming why a known key no longer works: revoked, or expired (when)."""
    if caller.revoked_at is not None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, f"API key {caller.prefix}... was revoked", headers=UNAUTHORIZED
        )
    if caller.expires_at is not None and caller.expired(utcnow()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            f"API key {caller.prefix}... expired at {caller.expires_at.isoformat()}",
            headers=UNAUTHORIZED,
        )


async def current_key(
    request: Request,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """Authentication: the key's caller, or 401 naming why not (missing, invalid, revoked, expired). What the key may
    do is app/api/scopes.py's question."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer API key", headers=UNAUTHORIZED)
    digest = hash_key(credentials.credentials)
    caller = ttl_cache.callers().get(digest)
    if caller is None:
        caller = await run_in_threadpool(identify, session, credentials.credentials)
        if caller is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid API key", headers=UNAUTHORIZED)
        _refuse_inactive(caller)  # only active callers are remembered
        ttl_cache.callers().put(digest, caller)
    _refuse_inactive(caller)  # a remembered key may have expired since
    # async, so the ids are bound in the request's own context: its later lines (and the access line) carry them
    path = request.path_params
    logs.bind(owner_id=caller.owner_id, job_id=path.get("job_id"), model_id=path.get("model_id"))
    return caller


CurrentKey = Annotated[Caller, Depends(current_key)]
