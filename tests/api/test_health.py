"""GET /healthz reports the database, the broker and live workers; 503 when the database is down."""

from __future__ import annotations


def test_health_without_workers_is_200_degraded(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is True
    assert body["workers"] == []
    assert body["status"] == "degraded"


def test_health_is_503_when_the_database_is_down(client, settings_env):
    # Nothing listens on port 1: the database is unreachable.
    settings_env(DATABASE_URL="postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2")
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"]["ok"] is False
    assert "OperationalError" in body["database"]["detail"]


def test_health_reports_the_broker_down(client, settings_env):
    settings_env(CELERY_BROKER_URL="redis://127.0.0.1:1/0", HEALTH_TIMEOUT_SECONDS="1")
    body = client.get("/healthz").json()
    assert body["broker"]["ok"] is False
    assert body["status"] == "degraded"


def test_openapi_docs_are_served(client):
    assert client.get("/docs").status_code == 200
    assert "/v1/pings" in client.get("/openapi.json").json()["paths"]
