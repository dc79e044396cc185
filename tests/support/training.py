"""Jobs, data and database checks shared by the end-to-end and reliability tests."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, text

from model.data.demo import numbers_to_words_task, split_numbers
from tests.support.client import write_jsonl

# Leases short enough that a killed worker's job is re-queued within seconds.
FAST_LEASES = {"JOB_LEASE_SECONDS": "10", "WORKER_HEARTBEAT_SECONDS": "2", "JOB_REDISPATCH_SECONDS": "30"}
TINY = {"preset": "tiny", "vocab_size": 500}


def numbers_job(dataset_id: str, valid_id: str | None = None, **training) -> dict:
    base = {
        "max_steps": 150,
        "warmup_steps": 50,
        "eval_every": 50,
        "checkpoint_every": 50,
        "max_length": 40,
        "max_tokens_per_batch": 2048,
        "seed": 3,
        "eval_budget": None,
    }  # evaluate exactly every eval_every steps: tests assert on those steps
    return {
        "objective": "translation",
        "dataset_id": dataset_id,
        "valid_dataset_id": valid_id,
        "model": TINY,
        "training": {**base, **training},
    }


def numbers_files(folder: Path) -> dict[str, Path]:
    """English number words -> German, with held-out numbers for validation."""
    train_numbers, held_out = split_numbers(0, 999, held_out=0.1, seed=0)
    return {
        "train": write_jsonl(folder / "train.jsonl", numbers_to_words_task(len(train_numbers), numbers=train_numbers)),
        "valid": write_jsonl(folder / "valid.jsonl", numbers_to_words_task(len(held_out), numbers=held_out)),
    }


def query(database_url: str, sql: str, **params):
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql), params).all()
    finally:
        engine.dispose()


def metric_duplicates(database_url: str, job_id: str | None = None) -> int:
    """(job, step, name) triples recorded more than once: for one job, or for all."""
    where = "WHERE job_id = :j" if job_id else ""
    return query(
        database_url,
        f"SELECT count(*) FROM (SELECT job_id, step, name FROM metrics {where} "
        f"GROUP BY job_id, step, name HAVING count(*) > 1) d",
        j=job_id,
    )[0][0]
