"""/metrics against the real service: uvicorn, Celery training and inference workers, PostgreSQL, Redis."""

from __future__ import annotations

import re
import sys
import uuid

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

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
from model.data.demo import numbers_to_words_task
from tests.support.client import Api, write_jsonl

TOKEN = "e2e-metrics-token-" + uuid.uuid4().hex
TRANSLATE_ROUTE = "/v1/models/{model_id}/translate"
Samples = dict[tuple[str, frozenset], float]


def scrape(url: str) -> Samples:
    """Every sample of a scrape, keyed by (sample name, labels); parsing fails on a malformed exposition."""
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert response.status_code == 200, response.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def tiny_job(dataset_id: str, max_steps: int) -> dict:
    return {
        "objective": "translation",
        "dataset_id": dataset_id,
        "model": {"preset": "tiny", "vocab_size": 500},
        "training": {
            "max_steps": max_steps,
            "warmup_steps": 10,
            "eval_every": max_steps,
            "checkpoint_every": max_steps,
            "max_length": 40,
            "max_tokens_per_batch": 1024,
            "seed": 3,
        },
    }


def jobs_by_status(database_url: str) -> dict[str, int]:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT status, count(*) FROM jobs GROUP BY status")).all()
    engine.dispose()
    return {status: n for status, n in rows}


def test_metrics_of_a_training_job_and_a_translation(tmp_path, fresh_postgres_url, redis_url):
    """A 30-step job trains while a second waits in the queue, then runs and is cancelled; a translation follows.

    Fails when a series is missing or implausible: queue depth disagrees with Redis, tokens/s of the running
    job is absent, jobs by status differ from the database, the translate request or its batch size is not counted.
    """
    env = service_env(
        DATABASE_URL=fresh_postgres_url,
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp_path / "var"),
        ARTIFACT_ROOT=str(tmp_path / "artifacts"),
        METRICS_TOKEN=TOKEN,
        WORKER_HEARTBEAT_SECONDS="2",
        JOB_LEASE_SECONDS="10",
        JOB_REDISPATCH_SECONDS="600",
    )
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    url = processes.start_api(env, free_port())
    processes.start_worker(env, "training", "trainer")
    processes.start_worker(env, "inference", "server", pool="threads", concurrency=4)
    try:
        wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="a training and an inference worker")
        assert httpx.get(f"{url}/metrics").status_code == 401
        assert httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401

        api = Api(url, create_key(env, "alice"))
        dataset = api.upload(write_jsonl(tmp_path / "n.jsonl", numbers_to_words_task(600, seed=1)), "parallel")
        first = api.submit(tiny_job(dataset["id"], max_steps=200))
        # Submitted once the first runs: two back-to-back submissions are dispatched by background tasks, in either
        # order, and the second must be the one that waits.
        api.wait(first["id"], ("running", "succeeded", "failed", "cancelled"), timeout=120)
        second = api.submit(tiny_job(dataset["id"], max_steps=100_000))  # waits: one training slot

        # While the first trains, the second's message waits in Redis: the depth must equal LLEN.
        broker = redis.Redis.from_url(redis_url)

        def while_first_runs():
            if api.job(first["id"])["status"] != "running":
                return None
            samples, waiting = scrape(url), broker.llen("training")
            return (samples, waiting) if api.job(first["id"])["status"] == "running" else None

        try:
            samples, waiting = wait_for(while_first_runs, timeout=120, what="a scrape while the first job runs")
        except AssertionError as exc:  # say where each job got to, and what the training worker did
            states = {name: api.job(job["id"])["status"] for name, job in (("first", first), ("second", second))}
            raise AssertionError(f"{exc}; jobs: {states}; trainer log:\n{processes.log('trainer')[-3000:]}") from exc
        assert waiting >= 1 and value(samples, "celery_queue_length", queue="training") == waiting
        assert value(samples, "celery_queue_length", queue="inference") is not None
        assert value(samples, "training_jobs", status="running") == 1
        assert value(samples, "training_jobs", status="queued") == 1
        assert value(samples, "celery_workers_alive", queue="training") == 1
        assert value(samples, "celery_workers_alive", queue="inference") == 1

        done = api.wait(first["id"], ("succeeded", "failed", "cancelled"), timeout=300)
        assert done["status"] == "succeeded", done["error"]

        # The second runs now; its tokens/s shows once its worker writes progress, then it is cancelled.
        def second_speed():
            return value(scrape(url), "training_job_tokens_per_second", job_id=second["id"])

        assert wait_for(second_speed, timeout=120, what="tokens/s of the running second job") > 0
        assert api.http.post(f"/v1/jobs/{second['id']}/cancel").status_code == 202
        api.wait(second["id"], ("cancelled",), timeout=60)

        response = api.http.post(
            f"/v1/models/{done['model_id']}/translate",
            json={"texts": ["one", "two hundred", "forty two"], "beam_size": 2},
        )
        assert response.status_code == 200, response.text
        assert "batch_size" not in response.json()

        samples, in_database = scrape(url), jobs_by_status(fresh_postgres_url)
        assert in_database == {"succeeded": 1, "cancelled": 1}
        for status in ("queued", "running", "succeeded", "failed", "cancelled"):
            assert value(samples, "training_jobs", status=status) == in_database.get(status, 0), status
        assert not any(name == "training_job_tokens_per_second" for name, _ in samples)  # nothing runs
        translate = {"method": "POST", "route": TRANSLATE_ROUTE}
        assert value(samples, "http_requests_total", **translate, status="200") == 1
        assert value(samples, "http_request_duration_seconds_count", **translate) == 1
        assert value(samples, "inference_batch_size_count") == 1  # one request, decoded in one batch ...
        assert value(samples, "inference_batch_size_sum") == 3  # ... of its three sentences
        assert value(samples, "inference_batch_size_bucket", le="2.0") == 0
        assert value(samples, "inference_batch_size_bucket", le="4.0") == 1
        for part in ("queue", "compute", "total"):  # where the request's time went, as its Server-Timing says
            assert value(samples, "inference_duration_seconds_count", task="translate", part=part) == 1
        compute = value(samples, "inference_duration_seconds_sum", task="translate", part="compute")
        assert compute * 1000 == pytest.approx(response.json()["compute_ms"], abs=0.01)
        assert value(samples, "metrics_source_up", source="database") == 1
        assert value(samples, "metrics_source_up", source="broker") == 1
    finally:
        processes.stop(timeout=30)


def test_several_api_processes_add_up_in_multiprocess_mode(tmp_path):
    """With PROMETHEUS_MULTIPROC_DIR, every scrape counts the requests of both uvicorn processes.

    Fails when a scrape reports only the share of the process that answered it.
    """
    folder = tmp_path / "prometheus"
    folder.mkdir()
    env = service_env(DATA_DIR=str(tmp_path / "var"), METRICS_TOKEN=TOKEN, PROMETHEUS_MULTIPROC_DIR=str(folder))
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    processes.start(
        "api",
        [
            sys.executable,
            "-m",
            "uvicorn",
            "app.main:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        env,
    )
    try:

        def started_pids() -> set[str]:  # each process creates its histogram file when it imports the app
            return {m.group(1) for f in folder.iterdir() if (m := re.fullmatch(r"histogram_(\d+)\.db", f.name))}

        wait_for(lambda: len(started_pids()) == 2, timeout=60, what="two API processes")
        sent = 0

        def both_served() -> bool:  # a fresh connection per request; a process writes its counter file when it serves
            nonlocal sent
            for _ in range(5):
                response = _get(f"{url}/v1/me")
                if response is not None:
                    assert response.status_code == 401
                    sent += 1
            return len([f for f in folder.iterdir() if f.name.startswith("counter_")]) == 2

        wait_for(both_served, timeout=60, what="both processes to answer requests", interval=0)
        for _ in range(6):
            samples = scrape(url)
            assert value(samples, "http_requests_total", method="GET", route="/v1/me", status="401") == sent
    finally:
        processes.stop(timeout=30)


def _get(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return None
