"""Database rows for a model made outside a job (as an admin import would), for tests and benchmarks."""

from __future__ import annotations

import uuid

from sqlalchemy import create_engine, text


def insert_model(database_url: str, owner: str, storage_key: str = "models/x", sha256: str = "") -> str:
    """A succeeded job and its translation model owned by `owner` (who must exist); returns the model id."""
    ids = {"d": str(uuid.uuid4()), "j": str(uuid.uuid4()), "m": str(uuid.uuid4())}
    engine = create_engine(database_url)
    with engine.begin() as c:
        o = c.execute(text("SELECT id FROM owners WHERE name = :n"), {"n": owner}).scalar()
        c.execute(
            text(
                "INSERT INTO datasets (id, owner_id, name, kind, format, rows, size_bytes, sha256, stats, "
                "storage_key, created_at) VALUES (:d, :o, 'import', 'parallel', 'jsonl', 1, 1, '', '{}', "
                "'x', now())"
            ),
            {**ids, "o": o},
        )
        c.execute(
            text(
                "INSERT INTO jobs (id, owner_id, dataset_id, objective, model_config, training_config, status, "
                "attempt, max_attempts, cancel_requested, request_sha256, step, total_steps, tokens_seen, "
                "created_at, updated_at) VALUES (:j, :o, :d, 'translation', '{}', '{}', 'succeeded', 1, 3, "
                "false, '', 1, 1, 0, now(), now())"
            ),
            {**ids, "o": o},
        )
        c.execute(
            text(
                "INSERT INTO models (id, owner_id, job_id, objective, config, tokenizer_fingerprint, metrics, "
                "source, parameters, storage_key, sha256, size_bytes, created_at) VALUES (:m, :o, :j, "
                "'translation', '{}', '', '{}', 'import', 1, :k, :s, 1, now())"
            ),
            {**ids, "o": o, "k": storage_key, "s": sha256},
        )
    engine.dispose()
    return ids["m"]
