"""Alembic environment: the URL comes from the service settings, the schema from app.db.access_tables, app.db.tables,
app.db.webhook_tables, app.db.glossary_tables, app.db.correction_tables, app.db.dataset_translation_tables,
app.db.pipeline_tables and app.db.audit_tables."""

from __future__ import annotations

from logging.config import fileConfig
from pathlib import Path

from alembic import context

from app.core.settings import get_settings
from app.db import (  # noqa: F401  (register the tables)
    access_tables,
    audit_tables,
    background_tables,
    correction_tables,
    dataset_translation_tables,
    glossary_tables,
    pipeline_tables,
    registry_tables,
    run_record_tables,
    tables,
    usage_tables,
    webhook_tables,
)
from app.db.base import Base
from app.db.session import make_engine

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def database_url() -> str:
    return config.attributes.get("database_url") or get_settings().database_url


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True, compare_type=True
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = database_url()
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = make_engine(url)
    with engine.connect() as connection:
        # render_as_batch lets ALTERs work on SQLite (table copy) and is a no-op elsewhere.
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True, compare_type=True
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
