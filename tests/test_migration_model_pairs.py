"""Migration 0040 keeps a model's language pairs with the model: a model of several pairs trained before it gets them
from its job's job_pairs rows, in their order, so that it still asks for target_language once its job is deleted."""

from __future__ import annotations

import json

from alembic import command
from sqlalchemy import text

from app.db.session import make_engine
from tests.test_migrations import _config, _insert_owners_and_keys_at_0019

AT = "2026-11-01 00:00:00+00:00"


def _insert_models_of_pairs_at_0039(url: str) -> None:
    _insert_owners_and_keys_at_0019(url)
    command.upgrade(_config(url), "0039")
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            for job_id in ("j-pairs", "j-one"):
                connection.execute(
                    text(
                        "INSERT INTO jobs (id, owner_id, objective, model_config, training_config, status, attempt, "
                        "max_attempts, cancel_requested, request_sha256, step, total_steps, tokens_seen, created_at, "
                        "updated_at) VALUES (:id, 'o-1', 'translation', '{}', '{}', 'succeeded', 1, 3, :no, '', 0, 10, "
                        "0, :at, :at)"
                    ),
                    {"id": job_id, "at": AT, "no": False},
                )
                connection.execute(
                    text(
                        "INSERT INTO models (id, owner_id, job_id, objective, config, tokenizer_fingerprint, metrics, "
                        "source, parameters, storage_key, sha256, size_bytes, created_at) VALUES (:id, 'o-1', :job, "
                        "'translation', '{}', 'f', '{}', 'last@1', 1, 'models/x', '', 1, :at)"
                    ),
                    {"id": f"m-{job_id}", "job": job_id, "at": AT},
                )
            for position, target in ((1, "fr"), (0, "de")):  # inserted out of order: the position orders them
                connection.execute(
                    text(
                        "INSERT INTO job_pairs (job_id, position, source_language, target_language) "
                        "VALUES ('j-pairs', :position, 'en', :target)"
                    ),
                    {"position": position, "target": target},
                )
    finally:
        engine.dispose()


def _assert_models_keep_their_pairs(url: str) -> None:
    _insert_models_of_pairs_at_0039(url)
    command.upgrade(_config(url), "0040")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, pairs FROM models ORDER BY id")).all()
            pairs = {model_id: json.loads(value) if isinstance(value, str) else value for model_id, value in rows}
            assert pairs == {"m-j-one": None, "m-j-pairs": [["en", "de"], ["en", "fr"]]}
    finally:
        engine.dispose()
    command.downgrade(_config(url), "0039")


def test_sqlite_models_of_pairs_keep_their_pairs(tmp_path):
    _assert_models_keep_their_pairs(f"sqlite:///{tmp_path / 'service.db'}")


def test_postgresql_models_of_pairs_keep_their_pairs(fresh_postgres_url):
    _assert_models_keep_their_pairs(fresh_postgres_url)
