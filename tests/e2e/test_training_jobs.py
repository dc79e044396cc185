"""Training jobs end to end over HTTP: real uvicorn, real Celery workers, PostgreSQL and Redis."""

from __future__ import annotations

import os
import signal

import pytest
from sqlalchemy import create_engine, text

from model.demo import numbers_to_words_task, split_numbers
from tests.support.client import Api, write_jsonl
from tests.support.stack import (Processes, create_key, free_port, healthy_with_workers, run_cli, service_env,
                                 wait_for)

FAST_LEASES = {"JOB_LEASE_SECONDS": "10", "WORKER_HEARTBEAT_SECONDS": "2", "JOB_REDISPATCH_SECONDS": "30"}
TINY = {"preset": "tiny", "vocab_size": 500}


def numbers_job(dataset_id: str, valid_id: str | None = None, **training) -> dict:
    base = {"max_steps": 150, "warmup_steps": 50, "eval_every": 50, "checkpoint_every": 50, "max_length": 40,
            "max_tokens_per_batch": 2048, "seed": 3}
    return {"objective": "translation", "dataset_id": dataset_id, "valid_dataset_id": valid_id, "model": TINY,
            "training": {**base, **training}}


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    train_numbers, held_out = split_numbers(0, 999, held_out=0.1, seed=0)
    return {
        "train": write_jsonl(folder / "train.jsonl", numbers_to_words_task(len(train_numbers), numbers=train_numbers)),
        "valid": write_jsonl(folder / "valid.jsonl", numbers_to_words_task(len(held_out), numbers=held_out)),
    }


@pytest.fixture
def stack(tmp_path, fresh_postgres_url, redis_url):
    """API + migrations against a fresh PostgreSQL database and Redis; workers started by each test."""
    env = service_env(DATABASE_URL=fresh_postgres_url, CELERY_BROKER_URL=redis_url, DATA_DIR=str(tmp_path / "var"),
                      ARTIFACT_ROOT=str(tmp_path / "artifacts"), **FAST_LEASES)
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    url = processes.start_api(env, free_port())
    try:
        yield url, env, processes
    finally:
        processes.stop(timeout=30)


def _start_training_worker(processes, env, url, name):
    processes.start_worker(env, "training", name)
    wait_for(healthy_with_workers(url, 1), timeout=60, what=f"worker {name}")


def _metric_duplicates(database_url: str, job_id: str) -> int:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        duplicates = connection.execute(text(
            "SELECT count(*) FROM (SELECT step, name FROM metrics WHERE job_id = :j GROUP BY step, name "
            "HAVING count(*) > 1) d"), {"j": job_id}).scalar()
    engine.dispose()
    return duplicates


def test_upload_train_and_get_a_model_that_learned(stack, data_files):
    url, env, processes = stack
    _start_training_worker(processes, env, url, "trainer-1")
    api = Api(url, create_key(env, "alice"))
    train = api.upload(data_files["train"], "parallel")
    valid = api.upload(data_files["valid"], "parallel")
    job = api.submit(numbers_job(train["id"], valid["id"], max_steps=300, eval_every=100, checkpoint_every=100))
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=400)
    assert done["status"] == "succeeded", done["error"]
    assert done["attempt"] == 1 and done["progress"]["step"] == 300 and done["progress"]["fraction"] == 1.0
    # Held-out numbers, never seen in training: the model spells them in German.
    assert done["latest_metrics"]["exact_match"]["value"] >= 0.8, done["latest_metrics"]
    series = api.metrics(job["id"], names="train_loss,valid_loss,lr")
    assert series["train_loss"]["steps"] == list(range(1, 301))
    assert series["valid_loss"]["steps"] == [100, 200, 300]
    assert series["train_loss"]["values"][-1] < series["train_loss"]["values"][0]
    checkpoints = api.checkpoints(job["id"])
    assert [c["step"] for c in checkpoints] == [100, 200, 300]
    assert all(len(c["sha256"]) == 64 and c["size_bytes"] > 0 and "path" not in c for c in checkpoints)
    model = api.http.get(f"/v1/models/{done['model_id']}").json()
    assert model["job_id"] == job["id"] and model["objective"] == "translation"
    assert model["config"]["d_model"] == 64 and len(model["tokenizer_fingerprint"]) == 64
    assert model["metrics"]["exact_match"] >= 0.8
    assert api.http.get("/v1/models").json()["total"] == 1
    assert _metric_duplicates(env["DATABASE_URL"], job["id"]) == 0


def test_worker_killed_mid_job_resumes_elsewhere_from_its_checkpoint(stack, data_files):
    """SIGKILL a worker after a checkpoint: the lease expires, another worker resumes and finishes (attempt 2)."""
    url, env, processes = stack
    first = processes.start_worker(env, "training", "doomed")
    wait_for(healthy_with_workers(url, 1), timeout=60, what="first worker")
    api = Api(url, create_key(env, "bob"))
    train = api.upload(data_files["train"], "parallel")
    job = api.submit(numbers_job(train["id"], max_steps=200, checkpoint_every=40, eval_every=40))
    wait_for(lambda: any(c["step"] >= 40 for c in api.checkpoints(job["id"])), timeout=240, what="a checkpoint")
    killed_at = api.job(job["id"])["progress"]["step"]
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    _start_training_worker(processes, env, url, "rescuer")
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert done["status"] == "succeeded", done["error"]
    assert done["attempt"] == 2
    assert "resumed from" in processes.log("rescuer") and "step-000000" in processes.log("rescuer")
    resumed_at = int(processes.log("rescuer").split("at step ")[1].split()[0])
    assert 40 <= resumed_at <= killed_at
    assert killed_at - resumed_at <= 40, "lost more than one checkpoint interval"
    assert api.metrics(job["id"], names="train_loss")["train_loss"]["steps"] == list(range(1, 201))
    assert _metric_duplicates(env["DATABASE_URL"], job["id"]) == 0


def test_duplicate_delivery_runs_once_and_cancel_stops_within_seconds(stack, data_files):
    from celery import Celery

    url, env, processes = stack
    _start_training_worker(processes, env, url, "trainer-2")
    api = Api(url, create_key(env, "carol"))
    train = api.upload(data_files["train"], "parallel")
    job = api.submit(numbers_job(train["id"], max_steps=100_000, eval_every=1000, checkpoint_every=1000))
    wait_for(lambda: api.job(job["id"])["progress"]["step"] >= 5, timeout=120, what="training to start")
    # The same message again, while the job runs: a second worker process must not start it twice.
    Celery("dup", broker=env["CELERY_BROKER_URL"]).send_task("service.train", args=[job["id"]], queue="training")
    response = api.http.post(f"/v1/jobs/{job['id']}/cancel")
    assert response.status_code == 202 and response.json()["cancel_requested"] is True
    cancelled = api.wait(job["id"], ("cancelled", "succeeded", "failed"), timeout=15)
    assert cancelled["status"] == "cancelled" and cancelled["attempt"] == 1
    last = max(api.metrics(job["id"], names="train_loss")["train_loss"]["steps"])
    assert last <= cancelled["progress"]["step"] + 1
    wait_for(lambda: "is not queued" in processes.log("trainer-2"), timeout=60, what="the duplicate to be a no-op")
    assert api.job(job["id"])["attempt"] == 1
    assert max(api.metrics(job["id"], names="train_loss")["train_loss"]["steps"]) == last
