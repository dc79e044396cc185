"""Worker faults on a real stack (uvicorn, Celery prefork workers, PostgreSQL, Redis): killed, stopped for a
deploy, torn checkpoints, jobs that crash every time. Each test names the fault and the pass condition."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from bench.harness.stack import wait_for
from tests.support.training import metric_duplicates, numbers_job, query

TERMINAL = ("succeeded", "failed", "cancelled")


def _resumed_at(log: str) -> int:
    """The step of the trainer's "resumed from <path> at step N" line, in JSON or text logs."""
    found = re.search(r"resumed from \S+ at step (\d+)", log)
    assert found, "the worker never logged a resume"
    return int(found.group(1))


def _running_with_expired_lease(database_url: str) -> int:
    return query(database_url, "SELECT count(*) FROM jobs WHERE status = 'running' AND lease_expires_at < now()")[0][0]


def test_sigkill_after_a_checkpoint_resumes_elsewhere_losing_at_most_one_interval(stack, data_files):
    """Fault: SIGKILL of the whole worker after a checkpoint. Pass: the lease expires, another worker resumes
    from the last checkpoint and finishes (attempt 2); lost work ≤ one checkpoint interval; one metric row per
    (job, step, name)."""
    first = stack.start_trainer("doomed")
    api = stack.api("bob")
    train = api.upload(data_files["train"], "parallel")
    job = api.submit(numbers_job(train["id"], max_steps=200, checkpoint_every=40, eval_every=40))
    wait_for(lambda: any(c["step"] >= 40 for c in api.checkpoints(job["id"])), timeout=240, what="a checkpoint")
    killed_at = api.job(job["id"])["progress"]["step"]
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    stack.start_trainer("rescuer")
    done = api.wait(job["id"], TERMINAL, timeout=300)
    assert done["status"] == "succeeded", done["error"]
    assert done["attempt"] == 2
    resumed_at = _resumed_at(stack.processes.log("rescuer"))
    assert 40 <= resumed_at <= killed_at and resumed_at % 40 == 0
    assert killed_at - resumed_at <= 40, "lost more than one checkpoint interval"
    assert api.metrics(job["id"], names="train_loss")["train_loss"]["steps"] == list(range(1, 201))
    assert metric_duplicates(stack.env["DATABASE_URL"], job["id"]) == 0


@pytest.mark.parametrize("target", ["main process", "process group"])
def test_sigterm_checkpoints_at_the_signal_and_the_job_resumes_elsewhere_losing_no_step(stack, data_files, target):
    """Fault: SIGTERM during training (a deploy: `docker stop` signals the main process, systemd the whole group),
    between two scheduled checkpoints. Pass: the worker checkpoints the step it is on, hands the job back
    (queued, the attempt not counted) and exits within seconds; nothing stays `running` with an expired lease;
    a new worker resumes from exactly that step and finishes with every step recorded once."""
    first = stack.start_trainer("deploying")
    api = stack.api("dora")
    train = api.upload(data_files["train"], "parallel")
    job = api.submit(numbers_job(train["id"], max_steps=240, checkpoint_every=120, eval_every=120))
    wait_for(lambda: api.job(job["id"])["progress"]["step"] >= 10, timeout=180, what="training under way")
    signalled_at = api.job(job["id"])["progress"]["step"]
    (os.kill if target == "main process" else os.killpg)(first.pid, signal.SIGTERM)
    assert first.wait(timeout=60) is not None  # a warm shutdown that ends on its own: no SIGKILL needed

    handed_back = api.job(job["id"])
    assert handed_back["status"] == "queued" and handed_back["attempt"] == 0, handed_back
    stopped_at = handed_back["progress"]["step"]
    assert signalled_at <= stopped_at < 120 and f"resuming from step {stopped_at}" in handed_back["error"]
    assert [c["step"] for c in api.checkpoints(job["id"])] == [stopped_at]
    assert max(api.metrics(job["id"], names="train_loss")["train_loss"]["steps"]) == stopped_at
    assert _running_with_expired_lease(stack.env["DATABASE_URL"]) == 0

    stack.start_trainer("successor")
    done = api.wait(job["id"], TERMINAL, timeout=240)
    assert done["status"] == "succeeded", done["error"]
    assert done["attempt"] == 1  # the deploy did not use up an attempt
    assert _resumed_at(stack.processes.log("successor")) == stopped_at  # no step lost, none repeated
    assert api.metrics(job["id"], names="train_loss")["train_loss"]["steps"] == list(range(1, 241))
    assert metric_duplicates(stack.env["DATABASE_URL"], job["id"]) == 0


def test_a_corrupted_newest_checkpoint_is_detected_and_training_falls_back_to_the_previous(stack, data_files):
    """Fault: the worker dies and the newest checkpoint's weights are damaged on disk (a torn write, bit rot).
    Pass: the next worker detects it by hash, resumes from the previous checkpoint, rewrites the later steps
    and finishes; metric rows stay one per (job, step, name)."""
    first = stack.start_trainer("crashing")
    api = stack.api("erin")
    train = api.upload(data_files["train"], "parallel")
    job = api.submit(numbers_job(train["id"], max_steps=120, checkpoint_every=30, eval_every=30))
    wait_for(lambda: len(api.checkpoints(job["id"])) >= 2, timeout=240, what="two checkpoints")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    newest = max(c["step"] for c in api.checkpoints(job["id"]))
    weights = (
        Path(stack.env["ARTIFACT_ROOT"])
        / "jobs"
        / job["id"]
        / "checkpoints"
        / f"step-{newest:08d}"
        / "model.safetensors"
    )
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))

    stack.start_trainer("careful")
    done = api.wait(job["id"], TERMINAL, timeout=300)
    assert done["status"] == "succeeded", done["error"]
    log = stack.processes.log("careful")
    assert _resumed_at(log) == newest - 30
    assert f"skipping checkpoint step-{newest:08d}: " in log  # the damaged one was named and passed over
    assert api.metrics(job["id"], names="train_loss")["train_loss"]["steps"] == list(range(1, 121))
    assert [c["step"] for c in api.checkpoints(job["id"])][-1] == 120
    assert metric_duplicates(stack.env["DATABASE_URL"], job["id"]) == 0


def test_a_job_that_crashes_every_attempt_fails_after_the_limit_and_the_queue_drains(
    tmp_path, fresh_postgres_url, private_redis, data_files
):
    """Fault: a poison job (its dataset's file vanished from the artifact store, so every attempt crashes).
    Pass: `failed` after JOB_MAX_ATTEMPTS attempts with the reason; the training queue drains (no message left
    waiting or unacknowledged) and a healthy job submitted after it succeeds."""
    from tests.reliability.conftest import open_stack

    with open_stack(tmp_path, fresh_postgres_url, private_redis.url, JOB_MAX_ATTEMPTS="3") as stack:
        stack.start_trainer("victim")
        api = stack.api("fay")
        poisoned = api.upload(data_files["train"], "parallel")
        healthy = api.upload(data_files["train"], "parallel")
        next((Path(stack.env["ARTIFACT_ROOT"]) / "datasets" / poisoned["id"]).iterdir()).unlink()
        job = api.submit(numbers_job(poisoned["id"], max_steps=20))
        failed = api.wait(job["id"], TERMINAL, timeout=120)
        assert failed["status"] == "failed" and failed["attempt"] == 3
        assert "not found" in failed["error"].lower() and poisoned["id"] in failed["error"], failed["error"]
        ok = api.submit(numbers_job(healthy["id"], max_steps=20, eval_every=10, checkpoint_every=10))
        assert api.wait(ok["id"], TERMINAL, timeout=180)["status"] == "succeeded"
        redis = private_redis.client()
        wait_for(
            lambda: redis.llen("training") == 0 and redis.hlen("unacked") == 0,
            timeout=30,
            what="the training queue to drain",
        )
        assert api.job(job["id"])["attempt"] == 3  # no redelivery ran it again
