"""The broker crashes (and comes back empty) while jobs train and while users submit new ones."""

from __future__ import annotations

import time

import httpx

from bench.harness.stack import wait_for
from tests.support.training import metric_duplicates, numbers_job, query

TERMINAL = ("succeeded", "failed", "cancelled")


def test_redis_crash_during_training_and_submissions_loses_no_accepted_job(redis_stack, private_redis, data_files):
    """Fault: Redis is killed (its queues are lost) while one job trains, users submit three more during the
    outage, then Redis restarts empty. Pass: no request gets a 5xx other than a documented 503; every job the
    API accepted (201) reaches `succeeded` — the running one finishes, the ones submitted during the outage are
    dispatched from the database's outbox once Redis is back — and no job runs twice."""
    stack = redis_stack
    stack.start_trainer("steady")
    api = stack.api("gus")
    train = api.upload(data_files["train"], "parallel")
    running = api.submit(numbers_job(train["id"], max_steps=120, checkpoint_every=60, eval_every=60))
    wait_for(lambda: api.job(running["id"])["progress"]["step"] >= 10, timeout=180, what="training under way")

    private_redis.stop()
    accepted, statuses = [running["id"]], []
    for i in range(3):
        response = api.http.post(
            "/v1/jobs", json=numbers_job(train["id"], max_steps=30, eval_every=15, checkpoint_every=15, seed=10 + i)
        )
        statuses.append(response.status_code)
        if response.status_code == 201:
            accepted.append(response.json()["id"])
        else:
            assert response.status_code == 503 and "Retry-After" in response.headers, response.text
    health = httpx.get(f"{stack.url}/healthz", timeout=30)
    assert health.json()["status"] == "degraded" and health.json()["broker"]["ok"] is False
    assert api.http.get("/v1/jobs").status_code == 200  # reads do not need the broker
    time.sleep(3)
    private_redis.start()

    done = {job_id: api.wait(job_id, TERMINAL, timeout=300) for job_id in accepted}
    assert len(accepted) >= 2, f"no submission was accepted during the outage: {statuses}"
    assert {j["status"] for j in done.values()} == {"succeeded"}, {
        k: (j["status"], j["error"]) for k, j in done.items()
    }
    for job_id, job in done.items():
        steps = api.metrics(job_id, names="train_loss")["train_loss"]["steps"]
        assert steps == list(range(1, job["progress"]["total_steps"] + 1))
    assert done[running["id"]]["attempt"] == 1  # the broker outage did not restart the running job
    assert metric_duplicates(stack.env["DATABASE_URL"]) == 0
    assert query(stack.env["DATABASE_URL"], "SELECT count(*) FROM models")[0][0] == len(accepted)
