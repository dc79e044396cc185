"""Injected dependencies: a database session per request and the caller's API key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.db.keys import authenticate
from app.db.models import ApiKey
from app.db.session import get_sessionmaker
from app.settings import Settings, get_settings


def get_session() -> Iterator[Session]:
    session = get_sessionmaker()()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]

_bearer = HTTPBearer(auto_error=False, description="An API key from `python -m app.cli create-key NAME`")


def current_key(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiKey:
    unauthorized = {"WWW-Authenticate": "Bearer"}
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer API key", headers=unauthorized)
    key = authenticate(session, credentials.credentials)
    if key is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid or revoked API key", headers=unauthorized)
    return key


CurrentKey = Annotated[ApiKey, Depends(current_key)]
