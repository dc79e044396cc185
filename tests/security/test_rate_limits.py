"""Abuse limits: requests per minute per API key, and queued + running jobs per owner (429 + Retry-After).

Request size limits (413) and inference limits (422) are tested in tests/api/test_datasets.py and
tests/e2e/test_inference_api.py::test_limits_answer_with_their_status_and_name.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import redis
from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient

from bench.harness.stack import ROOT, free_port, run_cli, wait_for
from tests.security.conftest import bearer

CORPUS = "".join(json.dumps({"source": f"{n} plums", "target": f"{n} Pflaumen"}) + "\n" for n in range(30)).encode()


@pytest.fixture
def pg_env() -> dict[str, str]:
    return {"MAX_ACTIVE_JOBS_PER_KEY": "2"}


@pytest.fixture
def embedded_client(settings_env):
    """The app in process in embedded mode (SQLite, SQLite broker): its rate limiter counts in memory."""
    from app.core.settings import get_settings
    from app.main import create_app

    def start(**env: str) -> TestClient:
        settings_env(**env)
        get_settings().ensure_dirs()
        config = Config(str(ROOT / "alembic.ini"))
        config.attributes["configure_logger"] = False
        command.upgrade(config, "head")
        return TestClient(create_app())

    return start


def _job(dataset_id: str) -> dict:
    return {
        "objective": "translation",
        "dataset_id": dataset_id,
        "model": {"preset": "tiny", "vocab_size": 500},
        "training": {"max_steps": 10},
    }


def _assert_429(response: httpx.Response, setting: str) -> None:
    assert response.status_code == 429, response.text
    assert setting in response.json()["detail"], response.text
    assert 1 <= int(response.headers["retry-after"]) <= 60, response.headers


def test_requests_over_the_rate_are_429_with_retry_after_naming_the_limit(embedded_client):
    client = embedded_client(RATE_LIMIT_PER_MINUTE="5")
    alice, other_key = bearer("alice"), bearer("alice-ci")
    for _ in range(10):
        assert client.get("/v1/me").status_code == 401  # unauthenticated: refused, and not counted for anyone
    assert [client.get("/v1/me", headers=alice).status_code for _ in range(5)] == [200] * 5
    _assert_429(client.get("/v1/me", headers=alice), "RATE_LIMIT_PER_MINUTE=5")
    _assert_429(client.get("/v1/datasets", headers=alice), "RATE_LIMIT_PER_MINUTE=5")  # per key, every route
    assert client.get("/v1/me", headers=other_key).status_code == 200  # another key has its own count
    for path in ("/healthz", "/dashboard", "/dashboard/app.js"):  # exempt: no key
        assert {client.get(path, headers=alice).status_code for _ in range(8)} == {200}, path


def test_a_keys_own_limit_replaces_the_setting_for_that_key_alone(embedded_client):
    """Fault: an admin gives a batch key a limit of 3, raises it, then puts the setting back. Pass: the 4th request
    in a minute is 429 naming the key's own limit while another key on the setting goes on; the raised limit lets it
    through; without its own it is held to RATE_LIMIT_PER_MINUTE again. A limit set after the key was used and
    remembered applies at its next request (this API process forgets the key)."""
    client = embedded_client(RATE_LIMIT_PER_MINUTE="8")
    admin = bearer("alice")
    created = client.post("/v1/keys", headers=admin, json={"name": "batch"}).json()
    batch, other = {"Authorization": f"Bearer {created['key']}"}, bearer("alice-ci")
    assert client.get("/v1/me", headers=batch).status_code == 200  # remembered, with no limit of its own

    def limit(value: int | None) -> None:
        response = client.patch(f"/v1/keys/{created['id']}", headers=admin, json={"rate_limit_per_minute": value})
        assert response.status_code == 200 and response.json()["rate_limit_per_minute"] == value, response.text

    limit(3)
    assert [client.get("/v1/me", headers=batch).status_code for _ in range(3)] == [200] * 3
    refused = client.get("/v1/datasets", headers=batch)
    _assert_429(refused, "the key's own rate_limit_per_minute=3")
    assert "more than 3 requests" in refused.json()["detail"] and "RATE_LIMIT_PER_MINUTE" not in refused.text
    assert [client.get("/v1/me", headers=other).status_code for _ in range(5)] == [200] * 5  # the setting's 8
    limit(6)
    assert [client.get("/v1/me", headers=batch).status_code for _ in range(6)] == [200] * 6
    _assert_429(client.get("/v1/me", headers=batch), "the key's own rate_limit_per_minute=6")
    limit(None)  # each limit counts on its own: the first request was made under the setting's 8, 7 are left
    assert [client.get("/v1/me", headers=batch).status_code for _ in range(7)] == [200] * 7
    _assert_429(client.get("/v1/me", headers=batch), "(RATE_LIMIT_PER_MINUTE=8)")


def test_a_keys_own_limit_holds_with_the_setting_off_and_reaches_other_processes(embedded_client):
    """RATE_LIMIT_PER_MINUTE=0 turns off the default only: a key's own limit still holds. Set in the database as
    another API process would (this one's memory of the key is off), it applies at the next request."""
    from app.db.access_tables import ApiKey
    from app.db.session import session_scope

    client = embedded_client(RATE_LIMIT_PER_MINUTE="0", AUTH_CACHE_SECONDS="0")
    alice, other = bearer("alice"), bearer("alice-ci")
    assert {client.get("/v1/me", headers=alice).status_code for _ in range(10)} == {200}
    with session_scope() as session:
        session.query(ApiKey).filter_by(name="alice").one().rate_limit_per_minute = 2
    assert [client.get("/v1/me", headers=alice).status_code for _ in range(2)] == [200] * 2
    _assert_429(client.get("/v1/me", headers=alice), "the key's own rate_limit_per_minute=2")
    assert {client.get("/v1/me", headers=other).status_code for _ in range(10)} == {200}


def test_rate_limit_zero_is_off(embedded_client):
    client = embedded_client(RATE_LIMIT_PER_MINUTE="0")
    alice = bearer("alice")
    assert {client.get("/v1/me", headers=alice).status_code for _ in range(30)} == {200}


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of this test's own, which it may freeze (SIGSTOP) and kill; the shared one stays up."""
    port = free_port()
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    wait_for(lambda: _pings(url), timeout=15, what=f"redis-server on port {port}")
    try:
        yield url, server
    finally:
        server.send_signal(signal.SIGCONT)
        server.kill()
        server.wait()


def _pings(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def test_a_frozen_or_dead_limiter_redis_lets_requests_through_and_logs_once(
    embedded_client, private_redis, caplog, monkeypatch
):
    """Redis frozen (no answer) or dead (refused): no 429, no 500, at most STORAGE_TIMEOUT of delay for one request
    now and then, one warning rather than one per request; counting resumes when Redis is back."""
    from app.api import ratelimit

    monkeypatch.setattr(ratelimit, "SKIP_AFTER_FAILURE", 3.0)
    url, server = private_redis
    client = embedded_client(CELERY_BROKER_URL=url, RATE_LIMIT_PER_MINUTE="3")
    alice = bearer("alice")
    caplog.set_level(logging.WARNING, logger="app.api.ratelimit")
    assert [client.get("/v1/me", headers=alice).status_code for _ in range(3)] == [200] * 3
    _assert_429(client.get("/v1/me", headers=alice), "RATE_LIMIT_PER_MINUTE=3")  # counted in this Redis
    limiter = ratelimit.limiter_for(url)
    failures = []
    monkeypatch.setattr(limiter, "_failed", lambda exc, failed=limiter._failed: (failures.append(exc), failed(exc)))
    server.send_signal(signal.SIGSTOP)
    timings = []
    for _ in range(6):
        started = time.monotonic()
        assert client.get("/v1/me", headers=alice).status_code == 200
        timings.append(time.monotonic() - started)
    # one request waits out the storage timeout, the next ones skip Redis (a busy machine may stall any of them)
    assert len(failures) == 1 and max(timings) < ratelimit.STORAGE_TIMEOUT + 1.5, (failures, timings)
    server.send_signal(signal.SIGCONT)
    time.sleep(ratelimit.SKIP_AFTER_FAILURE)
    _assert_429(client.get("/v1/me", headers=alice), "RATE_LIMIT_PER_MINUTE=3")  # the counts survived the freeze
    server.kill()
    server.wait()
    time.sleep(ratelimit.SKIP_AFTER_FAILURE)
    assert [client.get("/v1/me", headers=alice).status_code for _ in range(4)] == [200] * 4
    warnings = [r.getMessage() for r in caplog.records if r.name == "app.api.ratelimit"]
    assert len(warnings) == 1 and "rate limiter storage unavailable" in warnings[0], warnings


def test_active_jobs_over_the_limit_are_429_until_one_ends(pg_client):
    """MAX_ACTIVE_JOBS_PER_KEY=2: the third queued job is refused; a replay is not; a cancelled job frees a place."""
    alice = bearer("alice")
    dataset = pg_client.post(
        "/v1/datasets",
        headers=alice,
        data={"name": "plums", "kind": "parallel"},
        files={"file": ("plums.jsonl", CORPUS)},
    ).json()
    first = pg_client.post("/v1/jobs", headers={**alice, "Idempotency-Key": "first"}, json=_job(dataset["id"]))
    second = pg_client.post("/v1/jobs", headers=alice, json=_job(dataset["id"]))
    assert (first.status_code, second.status_code) == (201, 201)
    third = pg_client.post("/v1/jobs", headers=alice, json=_job(dataset["id"]))
    _assert_429(third, "MAX_ACTIVE_JOBS_PER_KEY=2")
    assert third.json()["detail"].startswith("2 jobs are already queued or running")
    replay = pg_client.post("/v1/jobs", headers={**alice, "Idempotency-Key": "first"}, json=_job(dataset["id"]))
    assert replay.status_code == 201 and replay.json()["id"] == first.json()["id"]
    bob = bearer("bob")  # another owner is not affected
    bob_data = pg_client.post(
        "/v1/datasets", headers=bob, data={"name": "p", "kind": "parallel"}, files={"file": ("p.jsonl", CORPUS)}
    ).json()
    assert pg_client.post("/v1/jobs", headers=bob, json=_job(bob_data["id"])).status_code == 201
    assert pg_client.post(f"/v1/jobs/{second.json()['id']}/cancel", headers=alice).status_code == 202
    assert pg_client.post("/v1/jobs", headers=alice, json=_job(dataset["id"])).status_code == 201
    assert pg_client.get("/v1/jobs", headers=alice, params={"status": "queued"}).json()["total"] == 2


def test_api_processes_share_the_counts_in_redis(api_stack):
    """Two API processes on one Redis: the rate is counted across both, and concurrent job submissions spread
    over both never put more than MAX_ACTIVE_JOBS_PER_KEY jobs in the queue, for any key of the owner."""
    first = api_stack("api-1", RATE_LIMIT_PER_MINUTE="10", MAX_ACTIVE_JOBS_PER_KEY="3")
    second = api_stack("api-2", RATE_LIMIT_PER_MINUTE="10", MAX_ACTIVE_JOBS_PER_KEY="3")
    urls = [first.url, second.url]
    alice = {"Authorization": f"Bearer {first.key('alice')}"}
    codes = [httpx.get(f"{urls[i % 2]}/v1/me", headers=alice).status_code for i in range(10)]
    assert codes == [200] * 10
    for url in urls:
        _assert_429(httpx.get(f"{url}/v1/me", headers=alice), "RATE_LIMIT_PER_MINUTE=10")

    bob = {"Authorization": f"Bearer {first.key('bob')}"}
    dataset = httpx.post(
        f"{first.url}/v1/datasets",
        headers=bob,
        data={"name": "plums", "kind": "parallel"},
        files={"file": ("plums.jsonl", CORPUS)},
        timeout=30,
    ).json()
    with ThreadPoolExecutor(8) as pool:
        responses = list(
            pool.map(
                lambda i: httpx.post(f"{urls[i % 2]}/v1/jobs", headers=bob, json=_job(dataset["id"]), timeout=30),
                range(8),
            )
        )
    assert sorted(r.status_code for r in responses) == [201] * 3 + [429] * 5, [r.text for r in responses]
    for refused in (r for r in responses if r.status_code == 429):
        _assert_429(refused, "MAX_ACTIVE_JOBS_PER_KEY=3")
    bob_ci = run_cli(first.env, "create-key", "bob-ci", "--owner", "bob").strip().splitlines()[-1]
    response = httpx.post(
        f"{second.url}/v1/jobs", headers={"Authorization": f"Bearer {bob_ci}"}, json=_job(dataset["id"]), timeout=30
    )
    _assert_429(response, "MAX_ACTIVE_JOBS_PER_KEY=3")  # a second key of the owner shares the count


def test_the_in_memory_limiter_counts_a_moving_window_without_a_thread_a_request(monkeypatch):
    """The embedded API's limiter (memory://) refuses the hit over the limit and lets one in once the oldest leaves
    the window; across 50 hits it starts at most one sweeping thread (limits' own started one 10 ms after a hit)."""
    import threading

    from limits import RateLimitItemPerSecond

    from app.api import ratelimit

    started = []
    real_start = threading.Timer.start
    monkeypatch.setattr(threading.Timer, "start", lambda timer: (started.append(timer), real_start(timer))[1])
    limiter = ratelimit._Limiter("memory://")
    started.clear()  # the one its construction starts
    item = RateLimitItemPerSecond(3)
    answers = [limiter.retry_after(item, "alice") for _ in range(4)]
    assert answers[:3] == [None] * 3 and answers[3] == 1
    assert limiter.retry_after(item, "bob") is None  # another key counts on its own
    time.sleep(1.05)
    assert limiter.retry_after(item, "alice") is None
    for _ in range(44):
        limiter.retry_after(item, "carol")
        time.sleep(0.012)  # each hit after limits' 10 ms timer would have ended
    assert len(started) <= 1, len(started)
