"""Fixtures of the security tests: the service as real processes on a fresh PostgreSQL database and Redis."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from bench.harness import services
from bench.harness.stack import (
    ROOT,
    START_TIMEOUT_S,
    Processes,
    create_key,
    free_port,
    healthy_with_workers,
    run_cli,
    service_env,
    wait_for,
)

QUEUES = ("training", "inference", "webhooks")  # the queues these tests' messages may be left in


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    processes: Processes
    artifacts: Path

    def key(self, owner: str) -> str:
        return create_key(self.env, owner)


def uvicorn_command(port: int, log_level: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "app.main:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        log_level,
    ]


def celery_command(queue: str, log_level: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "worker.celery_app",
        "worker",
        "-Q",
        queue,
        "-P",
        "threads",
        "-c",
        "4",
        "-n",
        f"{queue}@%h",
        "--loglevel",
        log_level,
    ]


def _empty_queues(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.delete(*QUEUES)
    client.close()


@pytest.fixture
def api_stack(tmp_path: Path, fresh_postgres_url: str, redis_url: str) -> Iterator[Callable[..., Stack]]:
    """`start(name, **env)` starts an API process (no workers) on one migrated database and returns its Stack."""
    processes = Processes(tmp_path)
    base = service_env(
        DATABASE_URL=fresh_postgres_url,
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp_path / "var"),
        ARTIFACT_ROOT=str(tmp_path / "artifacts"),
    )
    run_cli(base, "migrate")

    def start(name: str = "api", **overrides: str) -> Stack:
        env = {**base, **overrides}
        port = free_port()
        processes.start(name, uvicorn_command(port, "warning"), env)
        url = f"http://127.0.0.1:{port}"
        wait_for(healthy_with_workers(url, 0), timeout=START_TIMEOUT_S, what=f"{name} to answer /healthz")
        return Stack(url, env, processes, tmp_path / "artifacts")

    try:
        yield start
    finally:
        processes.stop()
        _empty_queues(redis_url)  # messages no worker of these tests takes


@pytest.fixture(scope="package")
def debug_stack(tmp_path_factory, postgres_url: str, redis_url: str) -> Iterator[Stack]:
    """API + inference worker with LOG_LEVEL=debug (uvicorn and Celery at debug), on a database of their own."""
    tmp = tmp_path_factory.mktemp("debug-stack")
    name = f"t_{uuid.uuid4().hex[:12]}"
    services.create_database(postgres_url, name)
    env = service_env(
        DATABASE_URL=services.with_database(postgres_url, name),
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp / "var"),
        ARTIFACT_ROOT=str(tmp / "artifacts"),
        LOG_LEVEL="debug",
        INFERENCE_TIMEOUT_SECONDS="60",
    )
    run_cli(env, "migrate")
    processes = Processes(tmp)
    port = free_port()
    processes.start("api", uvicorn_command(port, "debug"), env)
    processes.start("inference", celery_command("inference", "DEBUG"), env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(healthy_with_workers(url, 1), timeout=START_TIMEOUT_S, what="the API and the inference worker")
        yield Stack(url, env, processes, tmp / "artifacts")
    finally:
        processes.stop(timeout=30)
        services.drop_database(postgres_url, name)
        _empty_queues(redis_url)


@pytest.fixture
def pg_env() -> dict[str, str]:
    """More settings for pg_client; a test module overrides this fixture to change them."""
    return {}


@pytest.fixture
def pg_client(
    settings_env, pg_env: dict[str, str], fresh_postgres_url: str, redis_url: str, tmp_path: Path
) -> Iterator[TestClient]:
    """The app in process (TestClient) on a fresh, migrated PostgreSQL database and the test Redis."""
    from alembic import command
    from alembic.config import Config

    from app.main import create_app

    settings_env(
        DATABASE_URL=fresh_postgres_url,
        CELERY_BROKER_URL=redis_url,
        ARTIFACT_ROOT=str(tmp_path / "artifacts"),
        **pg_env,
    )
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")
    try:
        with TestClient(create_app()) as client:
            yield client
    finally:
        _empty_queues(redis_url)


def bearer(owner: str) -> dict[str, str]:
    """A new API key for `owner` (created in the app's database), as the header that carries it."""
    from app.db.keys import create_key as create_key_row
    from app.db.session import session_scope

    with session_scope() as session:
        _row, clear = create_key_row(session, owner)
    return {"Authorization": f"Bearer {clear}"}
