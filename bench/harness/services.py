"""Helpers to reach the real PostgreSQL and Redis and to reset the app's cached settings."""

from __future__ import annotations

import os
import re

import redis
from sqlalchemy.engine import make_url

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/15"


def redact(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@]+@", r"//\1:***@", url)


def postgres_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith("postgresql") else DEFAULT_POSTGRES


def redis_url() -> str:
    url = os.environ.get("CELERY_BROKER_URL", "")
    return url if url.startswith("redis") else DEFAULT_REDIS


def redis_db_below(url: str, below: int) -> str:
    """The same Redis server as `url`, the database `below` under url's (15 -> 14 for 1), emptied. Stacks whose
    workers must not take each other's tasks need a database each: `url`'s for per-test stacks, 1 below for the
    stack without workers (tests/e2e/test_inference_unavailable.py), 2 below for the one that lives across
    modules (tests/e2e/conftest.py). Two runs on one machine need urls 3 or more apart (tests/conftest.py gives each
    parallel test worker its own, REDIS_DBS_PER_WORKER apart)."""
    other = shifted_redis_url(url, below)
    redis.Redis.from_url(other, socket_timeout=3, socket_connect_timeout=3).flushdb()
    return other


def shifted_redis_url(url: str, below: int) -> str:
    """The same Redis server as `url`, the database `below` under url's; nothing is touched."""
    parsed = make_url(url)
    db = int(parsed.database or 0)
    if db < below:
        raise ValueError(f"CELERY_BROKER_URL {redact(url)} uses Redis database {db}: the tests need {below} below it")
    return parsed.set(database=str(db - below)).render_as_string(hide_password=False)


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def postgres_reachable(url: str) -> bool:
    try:
        import psycopg  # where PostgreSQL is used: a GPU host's benchmarks run without it

        with psycopg.connect(_libpq(url), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return True
    except Exception:  # psycopg.Error, or psycopg missing
        return False


def create_database(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def redis_reachable(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3).ping())
    except redis.RedisError:
        return False
