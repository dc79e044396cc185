"""The webhook delivery task against real HTTP receivers on 127.0.0.1 (threads running http.server): signed so that
`standardwebhooks` verifies it, retried on the configured schedule until the receiver recovers, bounded against a
receiver that hangs, never following a redirect, checked again by the SSRF guard at each attempt, and a no-op for a
message delivered twice. Attempts are made in process by the task's own function (`deliver`), on a migrated
SQLite database; tests/e2e/test_webhooks.py sends them through Celery workers."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import update

from app.core.settings import get_settings
from app.db import webhook_rows
from app.db.access_tables import ApiKey
from app.db.base import utcnow
from app.db.keys import create_key
from app.db.session import get_sessionmaker, session_scope
from app.db.webhook_tables import WebhookDelivery
from app.services import webhooks
from tests.support.api_app import migrated_client
from tests.support.receiver import Reply, receiver
from worker import reaper
from worker.tasks.webhook import deliver

FAST = {
    "WEBHOOK_ALLOW_PRIVATE": "true",  # the receivers are on 127.0.0.1
    "WEBHOOK_RETRY_SCHEDULE": "0.3,0.3,0.3",
    "WEBHOOK_TIMEOUT_SECONDS": "1",
    "WEBHOOK_REDISPATCH_SECONDS": "5",
}


class Service:
    def __init__(self, client, headers, owner_id):
        self.client, self.headers, self.owner_id = client, headers, owner_id

    def endpoint(self, url: str, events=("job.succeeded",)) -> dict:
        response = self.client.post("/v1/webhooks", json={"url": url, "events": list(events)}, headers=self.headers)
        assert response.status_code == 201, response.text
        return response.json()

    def emit(self, event_type: str = "job.succeeded", **data) -> str:
        (delivery_id,) = webhooks.emit(None, self.owner_id, event_type, {"job_id": "j-1", **data})
        return delivery_id


@pytest.fixture
def service(settings_env):
    settings_env(**FAST)
    with migrated_client() as client:
        with session_scope() as session:
            row, clear = create_key(session, "alice")
            owner_id = row.owner_id
        yield Service(client, {"Authorization": f"Bearer {clear}"}, owner_id)


def row(delivery_id: str) -> WebhookDelivery:
    with session_scope() as session:
        delivery = session.get(WebhookDelivery, delivery_id)
        assert delivery is not None
        session.expunge(delivery)
        return delivery


def attempt_when_due(delivery_id: str, timeout: float = 10):
    """What a worker does when the delivery's message arrives at its due time: one attempt."""
    due = row(delivery_id).next_attempt_at
    assert due is not None, "no attempt is due"
    time.sleep(max((due - utcnow()).total_seconds(), 0))
    return deliver(delivery_id)


def test_a_delivery_is_signed_so_that_the_receiver_verifies_it_and_is_recorded(service):
    with receiver() as r:
        endpoint = service.endpoint(r.url)
        delivery_id = service.emit(status="succeeded")
        done = deliver(delivery_id)
        assert done is not None and done.answer.status == 200 and done.retry_in is None
        (payload,) = r.verified(endpoint["secret"])  # raises unless webhook-id/-timestamp/-signature check out
        assert payload["type"] == "job.succeeded" and payload["data"] == {"job_id": "j-1", "status": "succeeded"}
        assert payload["timestamp"].endswith("Z")
        (request,) = r.requests
        assert request.path == "/hooks/in" and request.headers["Content-Type"] == "application/json"
        assert request.headers["webhook-signature"].startswith("v1,")
        assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 5
    delivery = row(delivery_id)
    assert delivery.status == "succeeded" and delivery.attempts == 1 and delivery.last_status_code == 200
    assert delivery.last_error is None and delivery.next_attempt_at is None and delivery.last_latency_ms is not None
    assert request.headers["webhook-id"] == delivery.message_id and delivery.message_id.startswith("msg_")
    listed = service.client.get(f"/v1/webhooks/{endpoint['id']}/deliveries", headers=service.headers).json()
    assert listed["total"] == 1 and listed["data"][0]["status"] == "succeeded"
    assert listed["data"][0]["payload"]["type"] == "job.succeeded" and listed["data"][0]["last_status_code"] == 200


def test_a_receiver_that_fails_then_recovers_gets_the_same_message_until_it_succeeds(service):
    """Fault: the receiver answers 500 twice. Pass: each failure is recorded and retried on the schedule (0.3 s here),
    the third attempt succeeds, and every attempt carries the same webhook-id, each signed for its own time."""
    failing = Reply(500, body=b"database is down")
    with receiver(failing, failing, Reply(204, body=b"")) as r:
        endpoint = service.endpoint(r.url)
        delivery_id = service.emit()
        first = deliver(delivery_id)
        assert first is not None and (first.number, first.answer.status, first.retry_in) == (1, 500, 0.3)
        failed_once = row(delivery_id)
        assert failed_once.status == "retrying" and failed_once.last_status_code == 500
        assert failed_once.last_error == "HTTP 500: database is down"
        assert failed_once.next_attempt_at is not None and failed_once.task_due_at == failed_once.next_attempt_at
        assert deliver(delivery_id) is None  # the retry's message arriving early (or twice) does nothing
        assert attempt_when_due(delivery_id).answer.status == 500
        third = attempt_when_due(delivery_id)
        assert (third.number, third.answer.status, third.retry_in) == (3, 204, None)
        assert deliver(delivery_id) is None  # over: a late message does nothing
        payloads = r.verified(endpoint["secret"])
        assert len(payloads) == 3 and payloads[0] == payloads[2]
        assert len({req.headers["webhook-id"] for req in r.requests}) == 1
        assert r.requests[1].at - r.requests[0].at >= 0.3 and r.requests[2].at - r.requests[1].at >= 0.3
    delivery = row(delivery_id)
    assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == (
        "succeeded",
        3,
        204,
        None,
    )


def test_a_delivery_fails_when_its_retries_run_out_and_a_redelivery_makes_one_attempt_more(service):
    with receiver(Reply(503, body=b"")) as r:
        endpoint = service.endpoint(r.url)
        delivery_id = service.emit()
        deliver(delivery_id)
        for _ in range(3):  # WEBHOOK_RETRY_SCHEDULE has three waits: four attempts in all
            attempt_when_due(delivery_id)
        delivery = row(delivery_id)
        assert (delivery.status, delivery.attempts, delivery.max_attempts) == ("failed", 4, 4)
        assert delivery.next_attempt_at is None and delivery.last_error == "HTTP 503"
        assert deliver(delivery_id) is None
        route = f"/v1/webhooks/{endpoint['id']}/deliveries/{delivery_id}/redeliver"
        again = service.client.post(route, headers=service.headers)
        assert again.status_code == 202, again.text
        assert again.json()["status"] == "pending" and again.json()["max_attempts"] == 5
        r.replies[:] = [Reply(200)]
        assert deliver(delivery_id).answer.status == 200
        assert len(r.requests) == 5 and len({req.headers["webhook-id"] for req in r.requests}) == 1
    assert row(delivery_id).status == "succeeded"


def test_a_hanging_receiver_costs_one_timeout_and_never_the_emitter(service):
    """Fault: the receiver holds every request for 3 s. Pass: emitting the event returns at once (no HTTP there);
    the attempt gives up after WEBHOOK_TIMEOUT_SECONDS (1 s), saying so, and a retry is scheduled."""
    with receiver(Reply(200, delay=3)) as r:
        service.endpoint(r.url)
        start = time.monotonic()
        delivery_id = service.emit()
        assert time.monotonic() - start < 0.5
        start = time.monotonic()
        done = deliver(delivery_id)
        took = time.monotonic() - start
        assert done is not None and done.answer.error == "no answer within 1 s" and done.retry_in == 0.3
        assert 0.9 < took < 2.0, took
        r.wait_for(1)
    delivery = row(delivery_id)
    assert delivery.status == "retrying" and delivery.last_status_code is None
    assert delivery.last_error == "no answer within 1 s" and delivery.last_latency_ms >= 900


def test_a_redirect_is_recorded_as_a_failure_and_not_followed(service):
    with receiver() as elsewhere, receiver(Reply(302, headers={"Location": "__target__"})) as r:
        r.replies[0].headers["Location"] = elsewhere.url
        service.endpoint(r.url)
        delivery_id = service.emit()
        done = deliver(delivery_id)
        assert done is not None and done.answer.status == 302 and done.retry_in == 0.3
        assert elsewhere.requests == [] and len(r.requests) == 1
    delivery = row(delivery_id)
    assert delivery.status == "retrying" and delivery.last_status_code == 302
    assert delivery.last_error == f"HTTP 302: redirects are not followed (to {elsewhere.url})"


def test_the_guard_runs_again_at_each_attempt(service, settings_env):
    """An endpoint registered while private receivers were allowed: once they are not, an attempt is refused
    before connecting (the same check resolves the host at every attempt, so a DNS change is caught too)."""
    with receiver() as r:
        service.endpoint(r.url)
        delivery_id = service.emit()
        settings_env(**{**FAST, "WEBHOOK_ALLOW_PRIVATE": "false"})
        done = deliver(delivery_id)
        assert done is not None and done.answer.status is None and r.requests == []
    delivery = row(delivery_id)
    assert delivery.status == "retrying"
    assert delivery.last_error.startswith(f"not sent: url {r.url!r}: host '127.0.0.1' is a loopback address")


def test_the_port_is_checked_again_at_each_attempt(service, settings_env):
    """An endpoint on a public address registered while its port was allowed: once WEBHOOK_ALLOWED_PORTS no longer
    lists it, an attempt is refused before connecting, naming the port and the ports allowed."""
    url = "https://93.184.215.14:8443/hooks/in"  # a public address: nothing is ever sent there
    settings_env(**{**FAST, "WEBHOOK_ALLOWED_PORTS": "8443"})
    service.endpoint(url)
    delivery_id = service.emit()
    settings_env(**{**FAST, "WEBHOOK_ALLOWED_PORTS": ""})
    done = deliver(delivery_id)
    assert done is not None and done.answer.status is None
    delivery = row(delivery_id)
    assert delivery.status == "retrying"
    assert delivery.last_error == (
        f"not sent: url {url!r}: port 8443 is not allowed for a receiver on a public address; allowed ports: 80, 443 "
        "(an operator may allow others with WEBHOOK_ALLOWED_PORTS)"
    )


def test_one_message_delivered_twice_at_once_sends_once(service):
    with receiver(Reply(200, delay=0.5)) as r:
        service.endpoint(r.url)
        delivery_id = service.emit()
        results = []
        threads = [threading.Thread(target=lambda: results.append(deliver(delivery_id))) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(result is None for result in results) == [False, True]
        assert len(r.requests) == 1
    assert row(delivery_id).attempts == 1


def test_a_disabled_endpoint_gets_nothing_new_and_its_pending_deliveries_fail_unsent(service):
    with receiver() as r:
        endpoint = service.endpoint(r.url)
        delivery_id = service.emit()
        patched = service.client.patch(
            f"/v1/webhooks/{endpoint['id']}", json={"enabled": False}, headers=service.headers
        )
        assert patched.status_code == 200 and patched.json()["enabled"] is False
        assert deliver(delivery_id) is None and r.requests == []
        assert webhooks.emit(None, service.owner_id, "job.succeeded", {"job_id": "j-2"}) == []
    delivery = row(delivery_id)
    assert delivery.status == "failed" and delivery.last_error == "not sent: the endpoint is disabled"


def test_the_reaper_sends_due_deliveries_whose_message_is_lost_or_was_never_sent(service, monkeypatch):
    sent: list[list[str]] = []
    monkeypatch.setattr(webhooks, "send", lambda ids, countdown=None: sent.append(ids))  # what it would send
    monkeypatch.setattr(reaper, "_next_delivery_prune", 0.0)
    with receiver() as r:
        service.endpoint(r.url)
        lost, fresh = service.emit(), service.emit()
    settings = get_settings()
    with session_scope() as session:  # sent 10 s ago and never taken (WEBHOOK_REDISPATCH_SECONDS is 5)
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == lost)
            .values(task_due_at=utcnow() - timedelta(seconds=10))
        )
    assert reaper.send_due_deliveries(settings) == [lost]
    assert reaper.send_due_deliveries(settings) == []  # one message per WEBHOOK_REDISPATCH_SECONDS
    assert sent[0] == [lost] and fresh not in sent[0]
    with session_scope() as session:  # a retry too far off for a countdown: left to the reaper, sent once due
        session.execute(update(WebhookDelivery).where(WebhookDelivery.id == fresh).values(task_due_at=None))
    assert reaper.send_due_deliveries(settings) == [fresh]


def test_after_a_rotation_both_secrets_sign_for_a_day(service):
    with receiver() as r:
        endpoint = service.endpoint(r.url)
        rotated = service.client.post(f"/v1/webhooks/{endpoint['id']}/rotate-secret", headers=service.headers)
        assert rotated.status_code == 200
        new = rotated.json()["secret"]
        assert new.startswith("whsec_") and new != endpoint["secret"]
        deliver(service.emit())
        assert r.verified(new) == r.verified(endpoint["secret"])  # either secret verifies it
        assert len(r.requests[0].headers["webhook-signature"].split(" ")) == 2


def test_emitting_inside_a_transaction_commits_or_rolls_back_with_it(service):
    """The deliveries of an event are rows of the caller's transaction: kept if it commits, gone if it rolls back."""
    with receiver() as r:
        service.endpoint(r.url)
    with session_scope() as session:
        kept = webhooks.emit(session, service.owner_id, "job.succeeded", {"job_id": "j-kept"})
    session = get_sessionmaker()()
    try:
        dropped = webhooks.emit(session, service.owner_id, "job.succeeded", {"job_id": "j-dropped"})
        session.rollback()
    finally:
        session.close()
    assert len(kept) == 1 and len(dropped) == 1
    with session_scope() as session:
        assert session.get(WebhookDelivery, kept[0]) is not None
        assert session.get(WebhookDelivery, dropped[0]) is None


def test_emitting_never_raises_nor_waits_for_a_broker_that_is_away(service, settings_env):
    settings_env(**FAST, CELERY_BROKER_URL="redis://127.0.0.1:9/0")  # nothing listens there
    with receiver() as r:
        service.endpoint(r.url)
        start = time.monotonic()
        delivery_ids = webhooks.emit(None, service.owner_id, "job.succeeded", {"job_id": "j-1"})
        assert time.monotonic() - start < 0.5 and len(delivery_ids) == 1
    assert row(delivery_ids[0]).status == webhook_rows.PENDING  # the reaper sends it once the broker is back


def test_an_unknown_event_type_is_logged_and_not_emitted(service, caplog):
    assert webhooks.emit(None, service.owner_id, "dataset.readdy", {"dataset_id": "d"}) == []
    assert "'dataset.readdy' is not one of" in caplog.text


def test_an_emit_that_fails_leaves_the_callers_transaction_as_it_was(service, caplog):
    """Fault: the event's data cannot be serialised (a caller's bug). Pass: emit logs it and returns no delivery; the
    change it was to report still commits."""
    with receiver() as r:
        service.endpoint(r.url)
    with session_scope() as session:
        row_, _clear = create_key(session, "carol")
        assert webhooks.emit(session, service.owner_id, "job.succeeded", {"when": utcnow()}) == []
        key_id = row_.id
    assert "webhook event job.succeeded of owner" in caplog.text and "not recorded" in caplog.text
    with session_scope() as session:
        assert session.get(ApiKey, key_id) is not None
