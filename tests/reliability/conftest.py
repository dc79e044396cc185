"""A real stack per test (uvicorn + migrations on a fresh PostgreSQL database); each test starts its workers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from bench.harness.stack import (
    START_TIMEOUT_S,
    Processes,
    create_key,
    free_port,
    healthy_with_workers,
    run_cli,
    service_env,
    wait_for,
)
from tests.support.client import Api
from tests.support.redis_server import RedisServer
from tests.support.training import FAST_LEASES, numbers_files


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    processes: Processes

    def api(self, name: str) -> Api:
        return Api(self.url, create_key(self.env, name))

    def start_trainer(self, name: str, n_workers: int = 1, **env: str):
        worker = self.processes.start_worker({**self.env, **env}, "training,data", name)
        wait_for(healthy_with_workers(self.url, n_workers), timeout=START_TIMEOUT_S, what=f"worker {name}")
        return worker


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    return numbers_files(tmp_path_factory.mktemp("data"))


@contextmanager
def open_stack(tmp_path, database_url: str, broker_url: str, **env: str) -> Iterator[Stack]:
    env = service_env(
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker_url,
        DATA_DIR=str(tmp_path / "var"),
        ARTIFACT_ROOT=str(tmp_path / "artifacts"),
        **{**FAST_LEASES, **env},
    )
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    try:
        yield Stack(processes.start_api(env, free_port()), env, processes)
    finally:
        processes.stop(timeout=30)


@pytest.fixture
def stack(tmp_path, fresh_postgres_url, redis_url):
    """On the shared Redis."""
    with open_stack(tmp_path, fresh_postgres_url, redis_url) as s:
        yield s


@pytest.fixture
def private_redis(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_stack(tmp_path, fresh_postgres_url, private_redis):
    """On a Redis server of its own, which the test may crash and restart."""
    with open_stack(tmp_path, fresh_postgres_url, private_redis.url) as s:
        yield s
