"""The schema comes from Alembic only: it upgrades on SQLite and PostgreSQL and matches the models."""

from __future__ import annotations

import json
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


def _insert_owners_and_keys_at_0019(url: str) -> None:
    """Two owners and three keys (one revoked) as revision 0019 stored them."""
    from sqlalchemy import text

    command.upgrade(_config(url), "0019")
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            for owner_id, name in (("o-1", "alice"), ("o-2", "bob")):
                connection.execute(
                    text("INSERT INTO owners (id, name, created_at) VALUES (:id, :name, :at)"),
                    {"id": owner_id, "name": name, "at": "2026-01-01 00:00:00+00:00"},
                )
            for key_id, owner_id, revoked in (
                ("k-1", "o-1", None),
                ("k-2", "o-1", "2026-02-01 00:00:00+00:00"),
                ("k-3", "o-2", None),
            ):
                connection.execute(
                    text(
                        "INSERT INTO api_keys (id, owner_id, name, prefix, key_hash, created_at, revoked_at) "
                        "VALUES (:id, :owner, :id, :id, :hash, :at, :revoked)"
                    ),
                    {
                        "id": key_id,
                        "owner": owner_id,
                        "hash": key_id * 8,
                        "at": "2026-01-01 00:00:00+00:00",
                        "revoked": revoked,
                    },
                )
    finally:
        engine.dispose()


def _assert_owners_become_organisations(url: str) -> None:
    """Fault: an existing database of owners and keys is upgraded past 0021. Pass: each owner has one admin member
    named after it, every key (the revoked one too) belongs to it with all scopes and no expiry, and downgrading
    keeps the keys."""
    from sqlalchemy import text

    _insert_owners_and_keys_at_0019(url)
    command.upgrade(_config(url), "head")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            members = connection.execute(text("SELECT id, owner_id, name, role FROM members ORDER BY name")).all()
            assert [(m.owner_id, m.name, m.role) for m in members] == [
                ("o-1", "alice", "admin"),
                ("o-2", "bob", "admin"),
            ]
            by_owner = {m.owner_id: m.id for m in members}
            keys = connection.execute(
                text("SELECT id, owner_id, member_id, scopes, expires_at, revoked_at FROM api_keys ORDER BY id")
            ).all()
            assert [k.id for k in keys] == ["k-1", "k-2", "k-3"]
            for key in keys:
                scopes = key.scopes if isinstance(key.scopes, list) else json.loads(key.scopes)
                assert key.member_id == by_owner[key.owner_id]
                assert scopes == ["read", "inference", "train", "models:write", "admin"]
                assert key.expires_at is None
            assert keys[1].revoked_at is not None
    finally:
        engine.dispose()
    command.downgrade(_config(url), "0019")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM api_keys")).scalar() == 3
            assert "members" not in inspect(connection).get_table_names()
    finally:
        engine.dispose()


def test_sqlite_owners_become_organisations_with_an_admin(tmp_path):
    _assert_owners_become_organisations(f"sqlite:///{tmp_path / 'service.db'}")


def test_postgresql_owners_become_organisations_with_an_admin(fresh_postgres_url):
    _assert_owners_become_organisations(fresh_postgres_url)


def _assert_keys_get_no_rate_limit_of_their_own(url: str) -> None:
    """Fault: a database with keys is upgraded past 0027, then downgraded. Pass: every key keeps working with no limit
    of its own (the setting applies), one set afterwards is stored, and downgrading drops the column but no key."""
    from sqlalchemy import text

    _insert_owners_and_keys_at_0019(url)
    command.upgrade(_config(url), "0027")
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            limits = connection.execute(text("SELECT id, rate_limit_per_minute FROM api_keys ORDER BY id")).all()
            assert [tuple(row) for row in limits] == [("k-1", None), ("k-2", None), ("k-3", None)]
            connection.execute(text("UPDATE api_keys SET rate_limit_per_minute = 5000 WHERE id = 'k-1'"))
            stored = connection.execute(text("SELECT rate_limit_per_minute FROM api_keys WHERE id = 'k-1'"))
            assert stored.scalar() == 5000
    finally:
        engine.dispose()
    command.downgrade(_config(url), "0026")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            columns = {column["name"] for column in inspect(connection).get_columns("api_keys")}
            assert "rate_limit_per_minute" not in columns and "expires_at" in columns
            assert connection.execute(text("SELECT count(*) FROM api_keys")).scalar() == 3
    finally:
        engine.dispose()


def test_sqlite_keys_get_no_rate_limit_of_their_own(tmp_path):
    _assert_keys_get_no_rate_limit_of_their_own(f"sqlite:///{tmp_path / 'service.db'}")


def test_postgresql_keys_get_no_rate_limit_of_their_own(fresh_postgres_url):
    _assert_keys_get_no_rate_limit_of_their_own(fresh_postgres_url)


def _assert_jobs_learn_the_key_that_submitted_them(url: str) -> None:
    """Fault: a database with jobs is upgraded past 0031. Pass: a job the audit trail says a key submitted gets that
    key, a sweep's trial its sweep's key, a job neither names none; downgrading drops the column, not the jobs."""
    from sqlalchemy import text

    _insert_owners_and_keys_at_0019(url)
    command.upgrade(_config(url), "0030")
    at = "2026-11-01 00:00:00+00:00"
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO sweeps (id, owner_id, key_id, key_prefix, name, objective, job_config, space, metric, "
                    "direction, max_concurrent, sampler, pruner, seed, resource, status, cancel_requested, version, "
                    "request_sha256, created_at, updated_at) VALUES ('s-1', 'o-1', 'k-3', 'k-3', 'enfr', "
                    "'translation', '{}', '{}', 'bleu', 'maximize', 2, 'tpe', 'none', 0, 'seconds', 'running', "
                    ":no, 0, '', :at, :at)"
                ),
                {"at": at, "no": False},
            )
            for job_id, sweep_id in (("j-audited", None), ("j-trial", "s-1"), ("j-unknown", None)):
                connection.execute(
                    text(
                        "INSERT INTO jobs (id, owner_id, objective, model_config, training_config, status, attempt, "
                        "max_attempts, cancel_requested, request_sha256, step, total_steps, tokens_seen, created_at, "
                        "updated_at, sweep_id) VALUES (:id, 'o-1', 'translation', '{}', '{}', 'queued', 0, 3, :no, "
                        "'', 0, 10, 0, :at, :at, :sweep)"
                    ),
                    {"id": job_id, "sweep": sweep_id, "at": at, "no": False},
                )
            connection.execute(
                text(
                    "INSERT INTO audit_events (id, owner_id, created_at, action, object_kind, object_id, details, "
                    "key_id) VALUES ('e-1', 'o-1', :at, 'job.submitted', 'job', 'j-audited', '{}', 'k-1')"
                ),
                {"at": at},
            )
    finally:
        engine.dispose()
    command.upgrade(_config(url), "0031")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            keys = connection.execute(text("SELECT id, key_id FROM jobs ORDER BY id")).all()
            assert [tuple(row) for row in keys] == [("j-audited", "k-1"), ("j-trial", "k-3"), ("j-unknown", None)]
    finally:
        engine.dispose()
    command.downgrade(_config(url), "0030")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert "key_id" not in {column["name"] for column in inspect(connection).get_columns("jobs")}
            assert connection.execute(text("SELECT count(*) FROM jobs")).scalar() == 3
    finally:
        engine.dispose()


def test_sqlite_jobs_learn_the_key_that_submitted_them(tmp_path):
    _assert_jobs_learn_the_key_that_submitted_them(f"sqlite:///{tmp_path / 'service.db'}")


def test_postgresql_jobs_learn_the_key_that_submitted_them(fresh_postgres_url):
    _assert_jobs_learn_the_key_that_submitted_them(fresh_postgres_url)
