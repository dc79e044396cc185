"""Ping round trip API -> broker -> real Celery worker -> database, on both transports."""

from __future__ import annotations

import os
import signal
import subprocess

import httpx
import pytest

from bench.harness.stack import (
    ROOT,
    START_TIMEOUT_S,
    Processes,
    create_key,
    free_port,
    healthy_with_workers,
    run_cli,
    service_env,
    wait_for,
)


def _ping_round_trip(url: str, key: str, queue: str) -> dict:
    headers = {"Authorization": f"Bearer {key}"}
    created = httpx.post(f"{url}/v1/pings", json={"queue": queue}, headers=headers, timeout=10)
    assert created.status_code == 202, created.text
    ping_id = created.json()["id"]

    def answered():
        body = httpx.get(f"{url}/v1/pings/{ping_id}", headers=headers, timeout=10).json()
        return body if body["answered_at"] else None

    return wait_for(answered, timeout=30, what=f"ping {ping_id} on {queue}")


def test_make_run_serves_health_docs_and_pings_then_stops_on_ctrl_c(tmp_path):
    """`make run` on the embedded default: SQLite database, SQLAlchemy transport, a worker per queue."""
    port = free_port()
    env = service_env(DATA_DIR=str(tmp_path / "var"), PORT=str(port))
    log = open(tmp_path / "make-run.log", "wb")
    make = subprocess.Popen(
        ["make", "-s", "run"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        health = wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="make run to become healthy")
        assert health["database"]["detail"] == "sqlite"
        assert health["broker"]["detail"].startswith("sqla+sqlite")
        # the training worker also takes the jobs that ask for a CPU (training.accelerator "cpu") and the CPU join
        # tasks of multi-host jobs, the inference worker the parsing of datasets and the webhook deliveries
        assert sorted(q for w in health["workers"] for q in w["queues"]) == [
            "data", "inference", "training", "training.cpu", "training.nodes.cpu", "webhooks"
        ]  # fmt: skip
        assert httpx.get(f"{url}/docs", timeout=5).status_code == 200
        output = wait_for(
            lambda: (
                "Local API key" in (tmp_path / "make-run.log").read_text() and (tmp_path / "make-run.log").read_text()
            ),
            timeout=30,
            what="the printed key",
        )
        key = output.split("Local API key", 1)[1].splitlines()[1].strip()
        assert httpx.get(f"{url}/v1/me", headers={"Authorization": f"Bearer {key}"}).status_code == 200
        for queue in ("training", "inference"):
            ping = _ping_round_trip(url, key, queue)
            assert ping["worker"].startswith(queue)
    finally:
        os.killpg(make.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground process group
        make.wait(timeout=60)
    leftovers = subprocess.run(["pgrep", "-f", f"--port {port}"], capture_output=True, text=True).stdout
    assert leftovers == "", f"processes left running after Ctrl-C: {leftovers}"
    assert "stopping" in (tmp_path / "make-run.log").read_text()


@pytest.fixture
def production_stack(tmp_path, fresh_postgres_url, redis_url):
    env = service_env(
        DATABASE_URL=fresh_postgres_url,
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp_path / "var"),
        ARTIFACT_ROOT=str(tmp_path / "artifacts"),
    )
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    url = processes.start_api(env, free_port())
    processes.start_worker(env, "training", "training-e2e")
    processes.start_worker(env, "inference", "inference-e2e")
    try:
        wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="API and workers to be healthy")
        yield url, env, processes
    finally:
        processes.stop()


def test_ping_round_trip_over_redis_and_postgresql(production_stack):
    url, env, _ = production_stack
    health = httpx.get(f"{url}/healthz").json()
    assert health["database"]["detail"] == "postgresql"
    assert health["broker"]["detail"].startswith("redis://")
    key = create_key(env, "dave")
    for queue in ("training", "inference"):
        ping = _ping_round_trip(url, key, queue)
        assert ping["worker"] == f"{queue}-e2e@{os.uname().nodename}"
        assert ping["round_trip_ms"] >= 0


def test_redelivered_ping_is_a_no_op(production_stack):
    """The same message delivered twice: the second delivery is received and changes nothing."""
    from celery import Celery

    url, env, processes = production_stack
    key = create_key(env, "erin")
    first = _ping_round_trip(url, key, "inference")
    Celery("redeliver", broker=env["CELERY_BROKER_URL"]).send_task("service.ping", args=[first["id"]], queue="training")
    wait_for(
        lambda: f"ping {first['id']} already answered" in processes.log("training-e2e"),
        timeout=30,
        what="the training worker to receive the duplicate",
    )
    again = httpx.get(f"{url}/v1/pings/{first['id']}", headers={"Authorization": f"Bearer {key}"}).json()
    assert (again["answered_at"], again["worker"]) == (first["answered_at"], first["worker"])
