"""A job's log end to end: real uvicorn, a real Celery training worker, PostgreSQL and Redis. What the worker logs
about a job (data statistics, device, evaluations, checkpoint writes, the end; a failure's traceback) comes back
from GET /v1/jobs/{id}/logs."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

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
from tests.support.training import FAST_LEASES, numbers_files, numbers_job

DONE = ("succeeded", "failed", "cancelled")


@pytest.fixture
def stack(tmp_path, fresh_postgres_url, redis_url):
    """API, migrations and one training worker; a job has 2 attempts and a lease of 10 s."""
    env = service_env(
        DATABASE_URL=fresh_postgres_url,
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp_path / "var"),
        ARTIFACT_ROOT=str(tmp_path / "artifacts"),
        JOB_MAX_ATTEMPTS="2",
        **FAST_LEASES,
    )
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    url = processes.start_api(env, free_port())
    try:
        processes.start_worker(env, "training,data", "logger")
        wait_for(healthy_with_workers(url, 1), timeout=START_TIMEOUT_S, what="worker")
        yield Api(url, create_key(env, "alice")), Path(env["ARTIFACT_ROOT"]), processes, env
    finally:
        processes.stop(timeout=30)


def messages(api: Api, job_id: str, until: str, timeout: float = 30) -> list[str]:
    """The job's log lines (every page), once one of them contains `until`: its last lines follow its status."""

    def read() -> list[str] | None:
        lines, after = [], 0
        while True:
            page = api.http.get(f"/v1/jobs/{job_id}/logs", params={"after": after, "limit": 50}).json()
            lines += [f"{line['level']} {line['message']}" for line in page["lines"]]
            after = page["next_after"]
            if not page["has_more"]:
                return lines if any(until in line for line in lines) else None

    return wait_for(read, timeout=timeout, what=f"{until!r} in the job's log")


def test_a_jobs_log_tells_its_data_device_evaluations_checkpoints_and_end(stack, tmp_path):
    api, *_ = stack
    files = numbers_files(tmp_path)
    train, valid = api.upload(files["train"], "parallel"), api.upload(files["valid"], "parallel")
    job = api.submit(numbers_job(train["id"], valid["id"], max_steps=20, eval_every=10, checkpoint_every=10))
    done = api.wait(job["id"], DONE, timeout=300)
    assert done["status"] == "succeeded", done["error"]
    lines = messages(api, job["id"], "succeeded at step 20")
    text = "\n".join(lines)
    assert f"info job {job['id']}: attempt 1 on logger@" in text
    assert f"read {train['rows']} rows of dataset {train['id']} and {valid['rows']} validation rows" in text
    assert f"{train['rows']} training and {valid['rows']} validation examples" in text
    assert "tokenizer byte_bpe (trained on the training rows), vocabulary" in text and "example length" in text
    assert "attempt 1 trains on cpu from scratch" in text
    assert "evaluation at step 10: valid_loss=" in text and "evaluation at step 20: valid_loss=" in text
    assert "checkpoint at step 10 written (" in text and "checkpoint at step 20 written (" in text
    assert f"info job {job['id']} succeeded at step 20 (max_steps): model {done['model_id']}" in text
    assert "resumed from" not in text and "training stopped" not in text  # the trainer's lines name local paths
    assert lines.index(next(line for line in lines if "read " in line)) < lines.index(
        next(line for line in lines if "checkpoint at step 10" in line)
    )
    assert "/" not in "".join(line.split("checkpoint")[-1] for line in lines if "checkpoint at step" in line)


def test_a_failed_jobs_log_ends_with_its_traceback(stack, tmp_path):
    """Fault: the training data's file is gone from the artifact store when the worker reads it. Pass: both attempts
    crash and the job fails; its log holds each crash with its traceback, naming the missing artifact."""
    api, artifacts, *_ = stack
    files = numbers_files(tmp_path)
    train = api.upload(files["train"], "parallel")
    shutil.rmtree(artifacts / "datasets" / train["id"])
    job = api.submit(numbers_job(train["id"], max_steps=20))
    done = api.wait(job["id"], DONE, timeout=120)
    assert done["status"] == "failed" and done["attempt"] == 2 and "ArtifactNotFound" in done["error"], done
    lines = messages(api, job["id"], "attempt 2 crashed")
    crashes = [line for line in lines if "Traceback" in line]
    assert len(crashes) == 2, lines
    for attempt, crash in enumerate(crashes, start=1):
        assert crash.startswith(f"error job {job['id']}: attempt {attempt} crashed\nTraceback (most recent call last):")
        assert "worker/training/job_data.py" in crash and f"datasets/{train['id']}" in crash
        assert crash.rstrip().splitlines()[-1].startswith("app.artifacts.store.ArtifactNotFound: artifact")


def test_a_resumed_jobs_log_says_which_attempt_resumed_from_which_checkpoint(stack, tmp_path):
    """Fault: the worker is SIGKILLed after a checkpoint. Pass: another worker resumes the job; the log's lines of
    attempt 2 say it trains from that checkpoint and its step, after attempt 1's lines."""
    api, _, processes, env = stack
    files = numbers_files(tmp_path)
    train = api.upload(files["train"], "parallel")
    job = api.submit(numbers_job(train["id"], max_steps=100, eval_every=20, checkpoint_every=20))
    wait_for(lambda: api.checkpoints(job["id"]), timeout=180, what="a checkpoint")
    doomed = processes.children["logger"]
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait()
    processes.start_worker(env, "training,data", "rescuer")
    done = api.wait(job["id"], DONE, timeout=300)
    assert done["status"] == "succeeded" and done["attempt"] == 2, done
    messages(api, job["id"], "succeeded at step 100")
    page = api.http.get(f"/v1/jobs/{job['id']}/logs", params={"limit": 2000}).json()
    resumed = [line for line in page["lines"] if "attempt 2 trains on cpu from checkpoint step-" in line["message"]]
    assert len(resumed) == 1 and resumed[0]["attempt"] == 2, page["lines"]
    step = int(resumed[0]["message"].rsplit("(step ", 1)[1].rstrip(")"))
    assert step >= 20 and step % 20 == 0 and f"step-{step:08d}" in resumed[0]["message"]
    attempts = [line["attempt"] for line in page["lines"]]
    assert attempts == sorted(attempts) and attempts[0] == 1  # attempt 1's lines, then attempt 2's
