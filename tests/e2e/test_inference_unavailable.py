"""Inference when nothing can answer: no worker (504) and a full queue (503), never a 500."""

from __future__ import annotations

import uuid

import httpx
import pytest
import redis

from tests.support.stack import Processes, create_key, free_port, healthy_with_workers, run_cli, service_env, wait_for


@pytest.fixture
def lonely_redis_url(redis_url):
    """A Redis database of its own, so no inference worker of another test can pick up these messages."""
    url = redis_url.rsplit("/", 1)[0] + "/14"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()


def test_no_worker_is_504_and_a_full_queue_is_503(tmp_path, fresh_postgres_url, lonely_redis_url):
    """Without an inference worker, requests time out (504); over the queue bound they are refused (503)."""
    from celery import Celery

    env = service_env(DATABASE_URL=fresh_postgres_url, CELERY_BROKER_URL=lonely_redis_url, DATA_DIR=str(tmp_path / "var"),
                      INFERENCE_TIMEOUT_SECONDS="2", INFERENCE_QUEUE_LIMIT="3")
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    url = processes.start_api(env, free_port())
    try:
        wait_for(healthy_with_workers(url, 0), timeout=30, what="api")
        key = create_key(env, "alice")
        model_id = _fake_model_row(env)
        headers = {"Authorization": f"Bearer {key}"}
        response = httpx.post(f"{url}/v1/models/{model_id}/translate", json={"texts": ["one"]}, headers=headers, timeout=30)
        assert response.status_code == 504
        assert "no inference worker answered within 2s" in response.json()["detail"]
        sender = Celery("fill", broker=lonely_redis_url)
        for _ in range(3):
            sender.send_task("service.noop", queue="inference")
        # The API reads the queue depth at most every DEPTH_TTL seconds, so the refusal may take a moment.
        response = wait_for(lambda: (r := httpx.post(f"{url}/v1/models/{model_id}/translate", json={"texts": ["one"]},
                                                     headers=headers, timeout=30)).status_code == 503 and r,
                            timeout=15, what="a 503 once the queue is over its bound")
        assert response.headers["retry-after"]
        assert "INFERENCE_QUEUE_LIMIT=3" in response.json()["detail"]
    finally:
        processes.stop()


def _fake_model_row(env) -> str:
    """A model row owned by alice (no files: no worker will look at it in this test)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(env["DATABASE_URL"])
    ids = {name: str(uuid.uuid4()) for name in ("dataset", "job", "model")}
    with engine.begin() as c:
        owner = c.execute(text("SELECT id FROM owners WHERE name = 'alice'")).scalar()
        c.execute(text("INSERT INTO datasets (id, owner_id, name, kind, format, rows, size_bytes, sha256, stats, "
                       "storage_key, created_at) VALUES (:d, :o, 'd', 'parallel', 'jsonl', 1, 1, '', '{}', 'x', now())"),
                  {"d": ids["dataset"], "o": owner})
        c.execute(text("INSERT INTO jobs (id, owner_id, dataset_id, objective, model_config, training_config, status, "
                       "attempt, max_attempts, cancel_requested, request_sha256, step, total_steps, tokens_seen, "
                       "created_at, updated_at) VALUES (:j, :o, :d, 'translation', '{}', '{}', 'succeeded', 1, 3, "
                       "false, '', 1, 1, 0, now(), now())"), {"j": ids["job"], "o": owner, "d": ids["dataset"]})
        c.execute(text("INSERT INTO models (id, owner_id, job_id, objective, config, tokenizer_fingerprint, metrics, "
                       "source, parameters, storage_key, sha256, size_bytes, created_at) VALUES (:m, :o, :j, "
                       "'translation', '{}', '', '{}', 'x', 1, 'models/x', '', 1, now())"),
                  {"m": ids["model"], "o": owner, "j": ids["job"]})
    engine.dispose()
    return ids["model"]
