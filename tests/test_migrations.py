"""The schema comes from Alembic only: it upgrades on SQLite and PostgreSQL and matches the models."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from app.db.base import Base
from app.db.session import make_engine

ROOT = Path(__file__).resolve().parents[1]


def _config(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["database_url"] = url
    config.attributes["configure_logger"] = False
    return config


def _assert_upgrade_matches_models(url: str) -> None:
    command.upgrade(_config(url), "head")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            head = ScriptDirectory.from_config(_config(url)).get_current_head()
            assert context.get_current_revision() == head
            assert {"owners", "api_keys", "pings", "workers"} <= set(inspect(connection).get_table_names())
    finally:
        engine.dispose()
    command.downgrade(_config(url), "base")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert set(inspect(connection).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()


def test_sqlite_upgrade_matches_models_and_downgrades(tmp_path):
    _assert_upgrade_matches_models(f"sqlite:///{tmp_path / 'service.db'}")


def test_postgresql_upgrade_matches_models_and_downgrades(fresh_postgres_url):
    _assert_upgrade_matches_models(fresh_postgres_url)


def test_revisions_form_a_single_line():
    heads = ScriptDirectory.from_config(_config("sqlite://")).get_heads()
    assert len(heads) == 1, f"several Alembic heads: {heads}"
