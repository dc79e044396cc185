"""Bounded soak: many small jobs while workers are killed at random and Redis crashes once."""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest

from tests.reliability.conftest import open_stack
from tests.support.training import metric_duplicates, numbers_job, query

N_JOBS = 30
STEPS = 24
SOAK_SECONDS = 420


@pytest.mark.slow
def test_soak_every_accepted_job_ends_and_no_work_is_duplicated(
    tmp_path, fresh_postgres_url, private_redis, data_files
):
    """Fault: 30 jobs submitted in waves while, every few seconds, a random training worker is SIGKILLed and
    replaced, and Redis is killed and restarted (empty) once. Pass: the set of accepted jobs equals the set of
    terminal jobs; every succeeded job reached its configured steps with each step's loss recorded once; no
    duplicate metric rows anywhere; failures only from exhausted attempts, never a lost or stuck job."""
    with open_stack(
        tmp_path, fresh_postgres_url, private_redis.url, MAX_ACTIVE_JOBS_PER_KEY=str(N_JOBS + 5), JOB_MAX_ATTEMPTS="5"
    ) as stack:
        _soak(stack, private_redis, data_files)


def _soak(stack, private_redis, data_files) -> None:
    rng = random.Random(7)
    workers = {f"w{i}": stack.start_trainer(f"w{i}", n_workers=i + 1) for i in range(2)}
    api = stack.api("soak")
    dataset = api.upload(data_files["train"], "parallel")
    accepted: list[str] = []
    kills, generation, redis_restarted = 0, 2, False
    start = time.monotonic()

    def submit(n: int) -> None:
        for _ in range(n):
            body = numbers_job(
                dataset["id"],
                max_steps=STEPS,
                eval_every=12,
                checkpoint_every=8,
                seed=len(accepted),
                max_tokens_per_batch=1024,
            )
            response = api.http.post("/v1/jobs", json=body)
            assert response.status_code in (201, 503), response.text
            if response.status_code == 201:
                accepted.append(response.json()["id"])

    def active() -> int:
        return sum(
            api.http.get("/v1/jobs", params={"status": s, "limit": 1}).json()["total"] for s in ("queued", "running")
        )

    submit(10)
    while len(accepted) < N_JOBS or active():
        assert time.monotonic() - start < SOAK_SECONDS, f"soak did not settle: {active()} jobs still active"
        time.sleep(rng.uniform(4, 8))
        if len(accepted) < N_JOBS:
            submit(min(5, N_JOBS - len(accepted)))
        if not redis_restarted and len(accepted) >= 20:
            private_redis.stop()
            submit(2)  # accepted into the database's outbox, or a 503
            time.sleep(2)
            private_redis.start()
            redis_restarted = True
        elif kills < 6 and rng.random() < 0.6:
            name = rng.choice(sorted(workers))
            os.killpg(workers[name].pid, signal.SIGKILL)
            workers.pop(name).wait()
            kills += 1
            replacement = f"w{generation}"
            generation += 1
            workers[replacement] = stack.processes.start_worker(stack.env, "training,data", replacement)

    jobs = {job_id: api.job(job_id) for job_id in accepted}
    by_status: dict[str, int] = {}
    for job in jobs.values():
        by_status[job["status"]] = by_status.get(job["status"], 0) + 1
    terminal = {
        row[0]
        for row in query(
            stack.env["DATABASE_URL"], "SELECT id FROM jobs WHERE status IN ('succeeded', 'failed', 'cancelled')"
        )
    }
    duplicates = metric_duplicates(stack.env["DATABASE_URL"])
    print(
        json.dumps(
            {
                "accepted": len(accepted),
                "terminal": len(terminal),
                **by_status,
                "worker_kills": kills,
                "redis_restarts": int(redis_restarted),
                "duplicate_metric_rows": duplicates,
                "attempts": sum(j["attempt"] for j in jobs.values()),
                "seconds": round(time.monotonic() - start, 1),
            }
        )
    )
    assert len(accepted) >= N_JOBS and redis_restarted and kills >= 3
    assert set(accepted) == terminal
    assert duplicates == 0
    for job_id, job in jobs.items():
        if job["status"] == "succeeded":
            assert job["progress"]["step"] == STEPS
            assert api.metrics(job_id, names="train_loss")["train_loss"]["steps"] == list(range(1, STEPS + 1))
        else:
            assert job["status"] == "failed" and "attempts" in job["error"], (job_id, job["error"])
    assert by_status.get("succeeded", 0) >= N_JOBS - 3
