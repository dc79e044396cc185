"""Webhooks end to end: real uvicorn, a training and an inference worker (which takes the webhooks queue), PostgreSQL
and Redis, and real receivers on 127.0.0.1. A tiny job succeeds and each receiver gets a `job.succeeded` it verifies
with `standardwebhooks`; one that fails at first gets it on a retry, one that hangs costs the job nothing; the job's
test set is scored and reported; registering its model and moving an alias are reported too."""

from __future__ import annotations

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
from tests.support.client import Api, write_jsonl
from tests.support.receiver import Reply, receiver
from tests.support.training import FAST_LEASES, numbers_files, numbers_job

WEBHOOKS = {
    "WEBHOOK_ALLOW_PRIVATE": "true",  # the receivers are on 127.0.0.1
    "WEBHOOK_RETRY_SCHEDULE": "1,1,1",
    "WEBHOOK_TIMEOUT_SECONDS": "2",
}


@pytest.fixture
def stack(tmp_path, fresh_postgres_url, redis_url):
    env = service_env(
        DATABASE_URL=fresh_postgres_url,
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp_path / "var"),
        ARTIFACT_ROOT=str(tmp_path / "artifacts"),
        SERVING_BACKEND="pytorch",  # no CTranslate2 conversion for the test set's evaluation
        **FAST_LEASES,
        **WEBHOOKS,
    )
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    url = processes.start_api(env, free_port())
    processes.start_worker(env, "training", "trainer")
    processes.start_worker(env, "inference", "server", pool="threads", concurrency=4)
    try:
        wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="the workers")
        yield url, env, processes
    finally:
        processes.stop(timeout=30)


def _register(api: Api, url: str, events: list[str]) -> dict:
    response = api.http.post("/v1/webhooks", json={"url": url, "events": events})
    assert response.status_code == 201, response.text
    return response.json()


def _deliveries(api: Api, webhook_id: str) -> list[dict]:
    return api.http.get(f"/v1/webhooks/{webhook_id}/deliveries").json()["data"]


def _delivered(api: Api, webhook_id: str, event_type: str, status: str = "succeeded"):
    def check():
        found = [d for d in _deliveries(api, webhook_id) if d["event_type"] == event_type]
        return found[0] if found and found[0]["status"] == status else None

    return check


def test_a_job_that_succeeds_is_reported_signed_to_every_receiver_whatever_each_does(stack, tmp_path):
    url, env, processes = stack
    api = Api(url, create_key(env, "alice"))
    files = numbers_files(tmp_path)
    train, valid = api.upload(files["train"], "parallel"), api.upload(files["valid"], "parallel")
    failing = Reply(500, body=b"not yet")
    with receiver() as good, receiver(failing, failing, Reply(200)) as flaky, receiver(Reply(200, delay=30)) as hung:
        wanted = ["job.succeeded", "job.failed", "evaluation.completed", "model.registered", "model.alias_moved"]
        good_hook = _register(api, good.url, wanted)
        flaky_hook = _register(api, flaky.url, ["job.succeeded"])
        hung_hook = _register(api, hung.url, ["job.succeeded"])
        job = api.submit(
            {
                **numbers_job(train["id"], valid["id"], max_steps=40, eval_every=20, checkpoint_every=20),
                "test_dataset_id": valid["id"],
                "name": "hooked",
            }
        )
        done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300)
        assert done["status"] == "succeeded", done["error"]

        # The good receiver: one job.succeeded, verified with its secret, naming the job and its model.
        wait_for(_delivered(api, good_hook["id"], "job.succeeded"), timeout=60, what="job.succeeded delivered")
        (event,) = [p for p in good.verified(good_hook["secret"]) if p["type"] == "job.succeeded"]
        assert event["data"]["job_id"] == job["id"] and event["data"]["model_id"] == done["model_id"]
        assert (event["data"]["status"], event["data"]["name"]) == ("succeeded", "hooked")
        assert event["data"]["link"] == f"/v1/jobs/{job['id']}"

        # The flaky one: two 500s, then the same message (one webhook-id) succeeds on the third attempt.
        delivery = wait_for(_delivered(api, flaky_hook["id"], "job.succeeded"), timeout=60, what="the retries")
        assert (delivery["attempts"], delivery["last_status_code"], delivery["last_error"]) == (3, 200, None)
        assert len(flaky.verified(flaky_hook["secret"])) == 3
        assert {r.headers["webhook-id"] for r in flaky.requests} == {delivery["message_id"]}

        # The hanging one: each attempt gives up after 2 s and is retried; the job never waited for it.
        stuck = wait_for(
            lambda: next((d for d in _deliveries(api, hung_hook["id"]) if d["last_error"]), None),
            timeout=60,
            what="a timed-out attempt",
        )
        assert stuck["last_error"] == "no answer within 2 s" and stuck["status"] in ("retrying", "failed")
        assert stuck["last_status_code"] is None

        # The test set's evaluation, reported when scored.
        scored = wait_for(
            _delivered(api, good_hook["id"], "evaluation.completed"), timeout=180, what="evaluation.completed"
        )
        evaluation = scored["payload"]["data"]
        assert evaluation["model_id"] == done["model_id"] and evaluation["job_id"] == job["id"]
        assert evaluation["status"] == "succeeded" and "bleu" in evaluation["scores"]

        # Registering the model and pointing an alias at it: reported from the API's own transaction.
        registered = api.http.patch(f"/v1/models/{done['model_id']}", json={"name": "numbers"})
        assert registered.status_code == 200, registered.text
        moved = api.http.put("/v1/models/numbers/aliases/production", json={"version": 1})
        assert moved.status_code == 200, moved.text
        wait_for(_delivered(api, good_hook["id"], "model.alias_moved"), timeout=60, what="model.alias_moved")
        payloads = {p["type"]: p["data"] for p in good.verified(good_hook["secret"])}
        assert payloads["model.registered"]["ref"] == "numbers@1"
        assert payloads["model.alias_moved"]["to_model_id"] == done["model_id"]

        # A redelivery: a new attempt now, with the same webhook-id.
        first = _delivered(api, good_hook["id"], "job.succeeded")()
        count = len(good.requests)
        again = api.http.post(f"/v1/webhooks/{good_hook['id']}/deliveries/{first['id']}/redeliver")
        assert again.status_code == 202, again.text
        good.wait_for(count + 1)
        assert good.requests[-1].headers["webhook-id"] == first["message_id"]
        assert good.verified(good_hook["secret"])[-1]["data"]["job_id"] == job["id"]
    assert "webhook delivery" in processes.log("server")  # attempts were made by the inference worker


def test_a_job_that_fails_and_one_cancelled_while_running_are_reported_by_the_worker(stack, tmp_path):
    url, env, _processes = stack
    api = Api(url, create_key(env, "bob"))
    files = numbers_files(tmp_path)
    train = api.upload(files["train"], "parallel")
    with receiver() as r:
        hook = _register(api, r.url, ["job.failed", "job.cancelled"])
        # Every row is longer than max_length=4 tokens: the worker fails the job at once, naming why.
        sentence = " ".join(f"word{i}" for i in range(30))
        long_rows = api.upload(write_jsonl(tmp_path / "long.jsonl", [(sentence, sentence)] * 20), "parallel")
        doomed = api.submit(numbers_job(long_rows["id"], max_length=4))
        failed = api.wait(doomed["id"], ("succeeded", "failed", "cancelled"), timeout=120)
        assert failed["status"] == "failed" and "examples left" in failed["error"]
        long = api.submit(numbers_job(train["id"], max_steps=100_000, eval_every=1000, checkpoint_every=1000))
        wait_for(lambda: api.job(long["id"])["progress"]["step"] >= 2, timeout=120, what="training to start")
        assert api.http.post(f"/v1/jobs/{long['id']}/cancel").status_code == 202
        assert api.wait(long["id"], ("succeeded", "failed", "cancelled"), timeout=60)["status"] == "cancelled"
        wait_for(_delivered(api, hook["id"], "job.cancelled"), timeout=60, what="job.cancelled delivered")
        wait_for(_delivered(api, hook["id"], "job.failed"), timeout=60, what="job.failed delivered")
        events = {p["type"]: p["data"] for p in r.verified(hook["secret"])}
    assert events["job.failed"]["job_id"] == doomed["id"] and events["job.failed"]["error"] == failed["error"]
    assert (events["job.cancelled"]["job_id"], events["job.cancelled"]["status"]) == (long["id"], "cancelled")
    assert events["job.cancelled"]["model_id"] is None
