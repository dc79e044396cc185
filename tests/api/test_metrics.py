"""GET /metrics in process: the token, the HTTP series, and what is read from the database and broker at scrape time."""

from __future__ import annotations

import uuid
from datetime import timedelta

from prometheus_client.parser import text_string_to_metric_families

TOKEN = "scraper-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
Samples = dict[tuple[str, frozenset], float]


def scrape(client) -> Samples:
    """Every sample of a scrape, keyed by (sample name, labels)."""
    response = client.get("/metrics", headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_answer_404_naming_the_setting_when_no_token_is_set(client):
    response = client.get("/metrics", headers=AUTH)
    assert response.status_code == 404
    assert response.json()["detail"] == "metrics are disabled; set METRICS_TOKEN"


def test_metrics_refuse_a_missing_or_wrong_token_with_401(client, settings_env, make_key):
    settings_env(METRICS_TOKEN=TOKEN)
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["detail"] == "missing bearer token (METRICS_TOKEN)"
    for wrong in (TOKEN[:-1], TOKEN + "x", TOKEN.upper(), make_key("alice")["Authorization"].split()[1]):
        response = client.get("/metrics", headers={"Authorization": f"Bearer {wrong}"})
        assert response.status_code == 401, wrong
        assert response.json()["detail"] == "wrong metrics token (METRICS_TOKEN)"
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert client.get("/metrics", headers=AUTH).status_code == 200


def test_requests_are_counted_by_route_template_never_by_raw_path(client, settings_env, make_key):
    settings_env(METRICS_TOKEN=TOKEN)
    headers = make_key("alice")
    before = scrape(client)
    ids = [str(uuid.uuid4()) for _ in range(3)]
    for job_id in ids:
        assert client.get(f"/v1/jobs/{job_id}", headers=headers).status_code == 404
    assert client.get(f"/no-such-page/{ids[0]}").status_code == 404
    assert client.request("PURGE", f"/v1/jobs/{ids[0]}", headers=headers).status_code == 405
    after = scrape(client)
    route = {"method": "GET", "route": "/v1/jobs/{job_id}"}
    assert (
        value(after, "http_requests_total", **route, status="404")
        - value(before, "http_requests_total", **route, status="404")
        == 3
    )
    assert (
        value(after, "http_request_duration_seconds_count", **route)
        - value(before, "http_request_duration_seconds_count", **route)
        == 3
    )
    assert value(after, "http_request_duration_seconds_bucket", **route, le="+Inf") == value(
        after, "http_request_duration_seconds_count", **route
    )
    assert value(after, "http_requests_total", method="GET", route="<unmatched>", status="404") >= 1
    assert value(after, "http_requests_total", method="OTHER", route="/v1/jobs/{job_id}", status="405") == 1
    labels = [v for name, pairs in after for _, v in pairs]
    assert not any(job_id in label for job_id in ids for label in labels), "a raw id leaked into a label"


def test_a_body_refused_before_routing_is_counted_under_its_route(client, settings_env, make_key):
    settings_env(METRICS_TOKEN=TOKEN, MAX_BODY_KB="1")
    headers = make_key("alice")
    before = scrape(client)
    response = client.post("/v1/jobs", headers={**headers, "Content-Type": "application/json"}, content=b" " * 4096)
    assert response.status_code == 413
    after = scrape(client)
    route = {"method": "POST", "route": "/v1/jobs", "status": "413"}
    assert value(after, "http_requests_total", **route) - value(before, "http_requests_total", **route) == 1


def test_jobs_by_status_running_jobs_and_live_workers_are_read_from_the_database(client, settings_env):
    from app.db.access_tables import Owner
    from app.db.base import utcnow
    from app.db.session import session_scope
    from app.db.tables import Job, Worker

    settings_env(METRICS_TOKEN=TOKEN, WORKER_HEARTBEAT_SECONDS="10")
    statuses = ["queued", "queued", "running", "running", "succeeded", "failed"]
    with session_scope() as session:
        owner = Owner(name="alice")
        session.add(owner)
        session.flush()
        jobs = [
            Job(
                owner_id=owner.id,
                objective="translation",
                model_config={},
                training_config={},
                status=s,
                max_attempts=3,
                request_sha256="",
                total_steps=200,
                step=50 * i,
                tokens_per_second=1000.0 + i if s == "running" else None,
            )
            for i, s in enumerate(statuses)
        ]
        session.add_all(jobs)
        now = utcnow()
        session.add_all(
            [
                Worker(hostname="trainer@a", queues="training", pid=1, last_seen_at=now),
                Worker(hostname="both@b", queues="training,inference", pid=2, last_seen_at=now),
                Worker(hostname="gone@c", queues="inference", pid=3, last_seen_at=now - timedelta(minutes=5)),
            ]
        )
    samples = scrape(client)
    assert {
        s: value(samples, "training_jobs", status=s) for s in ("queued", "running", "succeeded", "failed", "cancelled")
    } == {"queued": 2, "running": 2, "succeeded": 1, "failed": 1, "cancelled": 0}
    for i, job in enumerate(jobs):
        expected = 1000.0 + i if job.status == "running" else 0.0
        assert value(samples, "training_job_tokens_per_second", job_id=job.id) == expected, job.status
    assert value(samples, "training_job_progress_ratio", job_id=jobs[3].id) == 150 / 200
    assert value(samples, "celery_workers_alive", queue="training") == 2
    assert value(samples, "celery_workers_alive", queue="inference") == 1  # gone@c's heartbeat is stale
    assert value(samples, "metrics_source_up", source="database") == 1


def test_queue_depth_counts_waiting_messages_on_the_embedded_transport(client, settings_env):
    from app.core.task_names import PING
    from app.services.queueing import get_sender

    settings_env(METRICS_TOKEN=TOKEN)
    assert value(scrape(client), "celery_queue_length", queue="training") == 0
    for _ in range(2):  # no worker runs here: the messages wait in the broker's table
        get_sender().send_task(PING, args=[str(uuid.uuid4())], queue="training")
    samples = scrape(client)
    assert value(samples, "celery_queue_length", queue="training") == 2
    assert ("celery_queue_length", frozenset({("queue", "inference")})) in samples
    assert value(samples, "metrics_source_up", source="broker") == 1


def test_a_scrape_with_the_database_down_still_answers_and_reports_it(client, settings_env):
    settings_env(METRICS_TOKEN=TOKEN, DATABASE_URL="postgresql+psycopg://postgres@127.0.0.1:1/unreachable")
    samples = scrape(client)
    assert value(samples, "metrics_source_up", source="database") == 0
    assert not any(name == "training_jobs" for name, _ in samples)
    assert value(samples, "metrics_source_up", source="broker") == 1


def test_a_scraper_asking_for_openmetrics_gets_it(client, settings_env):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

    settings_env(METRICS_TOKEN=TOKEN)
    response = client.get("/metrics", headers={**AUTH, "Accept": "application/openmetrics-text; version=1.0.0"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert response.text.endswith("# EOF\n")
    names = {family.name for family in parse_openmetrics(response.text)}
    assert {"http_requests", "training_jobs", "celery_queue_length", "inference_batch_size"} <= names
