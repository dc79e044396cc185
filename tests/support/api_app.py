"""The API in-process: the settings' database migrated to head, and a TestClient of the app on it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient

from bench.harness.stack import ROOT


@contextmanager
def migrated_client() -> Iterator[TestClient]:
    """A TestClient of the app on the current settings' database (migrated to head) and folders."""
    from app.core.settings import get_settings
    from app.main import create_app

    get_settings().ensure_dirs()
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")
    with TestClient(create_app()) as test_client:
        yield test_client
