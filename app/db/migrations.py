"""Bringing the database schema to the newest Alembic revision (`python -m app.cli migrate`, and `serve`)."""

from __future__ import annotations


def upgrade_to_head(config_file: str = "alembic.ini") -> None:
    from alembic import command
    from alembic.config import Config

    config = Config(config_file)
    config.attributes["configure_logger"] = False  # keep the caller's logging as it is
    command.upgrade(config, "head")
