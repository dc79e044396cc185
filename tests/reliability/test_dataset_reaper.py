"""Datasets stuck in `processing` on a real stack (uvicorn, Celery prefork workers, PostgreSQL, Redis): the reaper
sends a parse whose message was lost again, and fails one that no worker finishes after DATASET_MAX_ATTEMPTS sends.
Each test names the fault and the pass condition, on a Redis server of its own (the first takes a message off it)."""

from __future__ import annotations

import httpx
import redis

from app.core.task_names import DATA_QUEUE
from bench.harness.stack import START_TIMEOUT_S, healthy_with_workers, wait_for
from tests.reliability.conftest import open_stack
from tests.support.training import query

STUCK_AFTER = {"DATASET_PROCESSING_TIMEOUT_SECONDS": "5", "DATASET_MAX_ATTEMPTS": "2"}


def _answering(url: str) -> bool:
    """The API is up (with no worker yet it answers 503)."""
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code in (200, 503)
    except httpx.HTTPError:
        return False


def _attempt(database_url: str, dataset_id: str) -> int:
    return query(database_url, "SELECT attempt FROM datasets WHERE id = :id", id=dataset_id)[0][0]


def test_a_parse_whose_message_was_lost_is_sent_again_and_the_dataset_gets_ready(
    tmp_path, fresh_postgres_url, private_redis, data_files
):
    """Fault: the parse's message is lost (taken off the broker before any worker reads it), as when a worker dies
    mid-parse and its message is not redelivered. Pass: DATASET_PROCESSING_TIMEOUT_SECONDS later the reaper sends it
    again (attempt 2), a data worker parses it, and it is ready."""
    with open_stack(tmp_path, fresh_postgres_url, private_redis.url, **STUCK_AFTER) as stack:
        wait_for(lambda: _answering(stack.url), timeout=60, what="the API")
        api = stack.api("erin")
        dataset = api.upload(data_files["train"], "parallel", wait=False)
        broker = redis.Redis.from_url(stack.env["CELERY_BROKER_URL"])
        assert broker.llen(DATA_QUEUE) == 1
        broker.delete(DATA_QUEUE)  # the message is lost
        stack.start_trainer("parser")
        done = api.processed(dataset["id"], timeout=90)
        assert done["status"] == "ready", done["error"]
        assert _attempt(stack.env["DATABASE_URL"], dataset["id"]) == 2
        assert "its task sent again" in stack.processes.log("parser")


def test_a_parse_no_worker_finishes_fails_after_the_last_attempt_naming_why_and_emits_dataset_failed(
    tmp_path, fresh_postgres_url, private_redis, data_files
):
    """Fault: no worker ever finishes the parse (here none reads the data queue; a worker killed mid-parse every
    time looks the same). Pass: sent twice, then failed with an error naming the sends and the timeout, and
    dataset.failed emitted to the owner's webhook."""
    with open_stack(
        tmp_path, fresh_postgres_url, private_redis.url, WEBHOOK_ALLOW_PRIVATE="true", **STUCK_AFTER
    ) as stack:
        wait_for(lambda: _answering(stack.url), timeout=60, what="the API")
        api = stack.api("frank")
        response = api.http.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["dataset.failed"]})
        assert response.status_code == 201, response.text
        webhook = response.json()
        dataset = api.upload(data_files["train"], "parallel", wait=False)
        stack.processes.start_worker(stack.env, "training", "reaper-only")  # its heartbeat runs the reaper
        wait_for(healthy_with_workers(stack.url, 1), timeout=START_TIMEOUT_S, what="the worker")
        done = api.processed(dataset["id"], timeout=90)
        assert done["status"] == "failed"
        assert done["error"] == (
            "its processing was sent to the data queue 2 times and none finished within "
            "DATASET_PROCESSING_TIMEOUT_SECONDS=5 (a worker died, or none reads the queue); upload it again"
        )
        assert _attempt(stack.env["DATABASE_URL"], dataset["id"]) == 2
        deliveries = api.http.get(f"/v1/webhooks/{webhook['id']}/deliveries").json()["data"]
        assert [d["event_type"] for d in deliveries] == ["dataset.failed"]
