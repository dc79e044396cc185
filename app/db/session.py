"""Engines and sessions. SQLite gets WAL and a busy timeout so the API and workers can share it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from app.core.settings import get_settings


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


@lru_cache
def get_engine() -> Engine:
    return make_engine(get_settings().database_url)


def _forget_inherited_connections() -> None:
    """In a forked child (a Celery prefork pool process, started again whenever one dies), the parent's pooled
    connections are the parent's: a child that used one would share its socket and its prepared statements (psycopg
    then fails with DuplicatePreparedStatement, or worse, answers go to the wrong process). SQLAlchemy's answer:
    drop them from the child's pool without closing them (the parent still uses them); the child opens its own."""
    if get_engine.cache_info().currsize:
        get_engine().dispose(close=False)


os.register_at_fork(after_in_child=_forget_inherited_connections)


@lru_cache
def get_sessionmaker() -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(), expire_on_commit=False)


@contextmanager
def session_scope() -> Iterator[Session]:
    """A session that commits on success and rolls back on error (for workers and the CLI)."""
    session = get_sessionmaker()()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def begin_before_savepoint(session: Session) -> None:
    """On SQLite, open the session's transaction if nothing has yet. pysqlite begins one only before a write, so a
    SAVEPOINT as a transaction's first statement would start a transaction of its own, which its RELEASE commits,
    whatever the session does afterwards. Elsewhere, nothing to do."""
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        return
    if not getattr(connection.connection.dbapi_connection, "in_transaction", True):
        connection.exec_driver_sql("BEGIN")
