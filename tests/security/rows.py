"""Rows the API cannot create (checkpoints, metrics, models come from workers), written straight to the database."""

from __future__ import annotations

import json
import uuid

from sqlalchemy import create_engine, text

from bench.harness.rows import insert_model

TINY_CONFIG = {
    "vocab_size": 500,
    "d_model": 64,
    "n_heads": 4,
    "n_encoder_layers": 2,
    "n_decoder_layers": 2,
    "d_ff": 256,
    "dropout": 0.0,
    "attention_dropout": 0.0,
    "activation": "relu",
    "norm_first": False,
    "share_embeddings": True,
    "max_positions": 1024,
    "pad_id": 0,
    "bos_id": 1,
    "eos_id": 2,
    "unk_id": 3,
    "mask_id": 4,
}


def insert_job_outputs(database_url: str, job_id: str, storage_key: str) -> str:
    """A checkpoint (at step 10, under `storage_key`), two metric points, a log line and a memory report (a failed
    measurement naming alice-memory-report) of a job; returns the checkpoint id."""
    checkpoint_id = str(uuid.uuid4())
    engine = create_engine(database_url)
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO checkpoints (id, job_id, step, storage_key, sha256, size_bytes, metrics, "
                "created_at) VALUES (:i, :j, 10, :k, :s, 1234, :m, now())"
            ),
            {"i": checkpoint_id, "j": job_id, "k": storage_key, "s": "c" * 64, "m": json.dumps({"valid_loss": 2.5})},
        )
        for step, value in ((1, 6.0), (10, 4.0)):
            c.execute(
                text(
                    "INSERT INTO metrics (job_id, step, name, value, created_at) VALUES (:j, :st, 'train_loss', "
                    ":v, now())"
                ),
                {"j": job_id, "st": step, "v": value},
            )
        c.execute(
            text(
                "INSERT INTO job_logs (job_id, seq, attempt, level, logger, message, created_at) VALUES "
                "(:j, 1, 1, 'info', 'worker.tasks.training', :m, now())"
            ),
            {"j": job_id, "m": f"job {job_id}: read 30 rows of alice-secret-log-line"},
        )
        c.execute(
            text("INSERT INTO job_memory (job_id, report, created_at) VALUES (:j, :r, now())"),
            {"j": job_id, "r": json.dumps({"error": "alice-memory-report"})},
        )
    engine.dispose()
    return checkpoint_id


def insert_tiny_model(database_url: str, owner: str, storage_key: str, sha256: str = "") -> str:
    """A translation model row with a real tiny config (so anatomy can be computed); returns its id."""
    model_id = insert_model(database_url, owner, storage_key=storage_key, sha256=sha256)
    engine = create_engine(database_url)
    with engine.begin() as c:
        c.execute(text("UPDATE models SET config = :c WHERE id = :m"), {"c": json.dumps(TINY_CONFIG), "m": model_id})
    engine.dispose()
    return model_id
