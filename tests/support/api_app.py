"""The API in-process: the settings' database migrated to head, and a TestClient of the app on it."""

from __future__ import annotations

import atexit
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from bench.harness.stack import ROOT

# A SQLite database at head, made by the first migration of this process: later SQLite databases are copies of it
# (SQLite's backup API, milliseconds) instead of 31 migrations each (0.3 s, some 450 times a run). A new PostgreSQL
# database is made the same way from a template database migrated once a process (CREATE DATABASE ... TEMPLATE).
# The migrations themselves are tested in tests/test_migrations.py, on both.
_TEMPLATE: Path | None = None
_PG_TEMPLATE: str | None = None


def _sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    return Path(parsed.database) if parsed.get_backend_name() == "sqlite" and parsed.database else None


def _copy(source: Path, target: Path) -> None:
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def _upgrade(database_url: str | None = None) -> None:
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["configure_logger"] = False
    if database_url:
        config.attributes["database_url"] = database_url
    command.upgrade(config, "head")


def _admin(database_url: str, *statements: str) -> None:
    import psycopg

    url = make_url(database_url).set(drivername="postgresql", database="postgres")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def _pg_is_empty(database_url: str) -> bool:
    """Whether the PostgreSQL database has no table yet (a test's new database, not one it already migrated)."""
    import psycopg

    url = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    return row is not None and row[0] == 0


def _from_pg_template(database_url: str) -> None:
    """The (new, empty) PostgreSQL database of `database_url` made again from this process's migrated template."""
    global _PG_TEMPLATE
    if _PG_TEMPLATE is None:
        name = f"head_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        _admin(database_url, f'CREATE DATABASE "{name}"')
        atexit.register(_admin, database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        _upgrade(make_url(database_url).set(database=name).render_as_string(hide_password=False))
        _PG_TEMPLATE = name
    target = make_url(database_url).database
    _admin(
        database_url,
        f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)',
        f'CREATE DATABASE "{target}" TEMPLATE "{_PG_TEMPLATE}"',
    )


def migrate(database_url: str) -> None:
    """The database at head: for a new SQLite file a copy of the first one this process migrated, for PostgreSQL a
    copy of a template database migrated once; otherwise migrated."""
    global _TEMPLATE
    target = _sqlite_file(database_url)
    if target is not None and _TEMPLATE is not None and not target.exists():
        _copy(_TEMPLATE, target)
        return
    if make_url(database_url).get_backend_name() == "postgresql" and _pg_is_empty(database_url):
        _from_pg_template(database_url)
        return
    _upgrade()
    if target is not None and _TEMPLATE is None:
        template = Path(tempfile.mkdtemp(prefix="migrated-")) / "head.db"
        _copy(target, template)
        _TEMPLATE = template


@contextmanager
def migrated_client() -> Iterator[TestClient]:
    """A TestClient of the app on the current settings' database (migrated to head) and folders."""
    from app.core.settings import get_settings
    from app.main import create_app

    settings = get_settings()
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app()) as test_client:
        yield test_client
