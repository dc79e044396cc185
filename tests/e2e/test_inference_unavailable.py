"""Inference when nothing can answer: no worker (504; 202 for an export), a full queue (503), never a 500."""

from __future__ import annotations

import httpx
import pytest
import redis

from bench.harness import services
from bench.harness.rows import insert_model
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


@pytest.fixture
def lonely_redis_url(redis_url):
    """A Redis database of its own, so no inference worker of another test can pick up these messages."""
    url = services.redis_db_below(redis_url, 1)
    yield url
    redis.Redis.from_url(url).flushdb()


def test_no_worker_is_504_and_a_full_queue_is_503(tmp_path, fresh_postgres_url, lonely_redis_url, monkeypatch):
    """Without an inference worker, requests time out (504); over the queue bound they are refused (503)."""
    from celery import Celery

    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery prefers it to broker=: the messages would go there

    env = service_env(
        DATABASE_URL=fresh_postgres_url,
        CELERY_BROKER_URL=lonely_redis_url,
        DATA_DIR=str(tmp_path / "var"),
        INFERENCE_TIMEOUT_SECONDS="2",
        EXPORT_TIMEOUT_SECONDS="2",
        INFERENCE_QUEUE_LIMIT="3",
    )
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    url = processes.start_api(env, free_port())
    try:
        wait_for(healthy_with_workers(url, 0), timeout=START_TIMEOUT_S, what="api")
        key = create_key(env, "alice")
        model_id = insert_model(env["DATABASE_URL"], "alice")  # no files: no worker looks at it here
        headers = {"Authorization": f"Bearer {key}"}
        response = httpx.post(
            f"{url}/v1/models/{model_id}/translate", json={"texts": ["one"]}, headers=headers, timeout=30
        )
        assert response.status_code == 504
        assert "no inference worker answered within 2s" in response.json()["detail"]
        # an export not built in time: 202, retry (a worker would go on building it into the store)
        response = httpx.get(f"{url}/v1/models/{model_id}/export", params={"format": "huggingface"}, headers=headers)
        assert response.status_code == 202 and response.headers["retry-after"] == "10"
        assert response.json()["detail"] == f"the huggingface export of model {model_id} is being built; retry shortly"
        sender = Celery("fill", broker=lonely_redis_url)
        for _ in range(3):
            sender.send_task("service.noop", queue="inference")
        # The API reads the queue depth at most every DEPTH_TTL seconds, so the refusal may take a moment.
        response = wait_for(
            lambda: (
                (
                    r := httpx.post(
                        f"{url}/v1/models/{model_id}/translate", json={"texts": ["one"]}, headers=headers, timeout=30
                    )
                ).status_code
                == 503
                and r
            ),
            timeout=15,
            what="a 503 once the queue is over its bound",
        )
        assert response.headers["retry-after"]
        assert "INFERENCE_QUEUE_LIMIT=3" in response.json()["detail"]
    finally:
        processes.stop()
