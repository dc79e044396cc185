"""Injected dependencies: a database session per request and the caller's API key."""

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

_bearer = HTTPBearer(auto_error=False, description="An API key from `python -m app.cli create-key NAME`")


async def current_key(
    request: Request,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    unauthorized = {"WWW-Authenticate": "Bearer"}
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer API key", headers=unauthorized)
    digest = hash_key(credentials.credentials)
    caller = ttl_cache.callers().get(digest)
    if caller is None:
        caller = await run_in_threadpool(identify, session, credentials.credentials)
        if caller is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid or revoked API key", headers=unauthorized)
        ttl_cache.callers().put(digest, caller)
    # async, so the ids are bound in the request's own context: its later lines (and the access line) carry them
    path = request.path_params
    logs.bind(owner_id=caller.owner_id, job_id=path.get("job_id"), model_id=path.get("model_id"))
    return caller


CurrentKey = Annotated[Caller, Depends(current_key)]
