"""Webhook endpoints over the API (no worker): registration checks the URL with the SSRF guard and the events by
name, shows the secret once, keeps each owner's endpoints their own, pages like every list; the routes that change a
model or cancel a job record the deliveries of their events; the CLI lists, creates and deletes endpoints.
Deliveries themselves are tests/worker/test_webhook_delivery.py's and tests/e2e/test_webhooks.py's."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.db.base import utcnow
from app.db.session import session_scope
from app.db.webhook_tables import WebhookDelivery
from app.services.webhook_endpoints import MAX_ENDPOINTS_PER_OWNER
from tests.api.test_init_model import _model_row

PUBLIC = "https://93.184.215.14/hooks/in"  # a public address: accepted without a lookup (nothing is sent here)


def _create(client, headers, url=PUBLIC, events=("job.succeeded",), **extra):
    return client.post("/v1/webhooks", json={"url": url, "events": list(events), **extra}, headers=headers)


def _deliveries(client, headers, webhook_id: str) -> list[dict]:
    response = client.get(f"/v1/webhooks/{webhook_id}/deliveries", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_register_shows_the_secret_once_and_reads_never_do(client, alice):
    created = _create(client, alice, events=["job.succeeded", "job.failed", "job.succeeded"], description="ci")
    assert created.status_code == 201, created.text
    webhook = created.json()
    assert webhook["secret"].startswith("whsec_") and len(webhook["secret"]) > 40
    assert (webhook["url"], webhook["events"], webhook["enabled"]) == (PUBLIC, ["job.succeeded", "job.failed"], True)
    read = client.get(f"/v1/webhooks/{webhook['id']}", headers=alice)
    assert read.status_code == 200 and "secret" not in read.json() and webhook["secret"] not in read.text
    listed = client.get("/v1/webhooks", headers=alice)
    assert webhook["secret"] not in listed.text and listed.json()["total"] == 1
    assert _create(client, alice).json()["secret"] != webhook["secret"]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://93.184.215.14/in", "the scheme must be http or https, not 'ftp'"),
        ("not a url", "holds spaces or control characters"),
        ("http://127.0.0.1:8080/in", "host '127.0.0.1' is a loopback address"),
        ("http://localhost:8080/in", "host 'localhost' resolves to"),
        ("http://10.1.2.3/in", "host '10.1.2.3' is a private address"),
        ("http://169.254.169.254/latest/meta-data/", "is a link-local address"),
        ("http://[::ffff:127.0.0.1]/in", "is a loopback address (127.0.0.1) in IPv6 form"),
        ("https://user:secret@93.184.215.14/in", "may not carry a user name or password"),
    ],
)
def test_a_url_that_is_not_a_public_receiver_is_refused_naming_it_and_why(client, alice, url, says):
    response = _create(client, alice, url=url)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "url"] and says in error["msg"] and repr(url) in error["msg"]
    assert client.get("/v1/webhooks", headers=alice).json()["total"] == 0


def test_private_receivers_are_accepted_when_the_operator_allows_them(settings_env):
    from tests.support.api_app import migrated_client

    settings_env(WEBHOOK_ALLOW_PRIVATE="true")
    with migrated_client() as client:
        from app.db.keys import create_key

        with session_scope() as session:
            _row, key = create_key(session, "lab")
        headers = {"Authorization": f"Bearer {key}"}
        for url in ("http://127.0.0.1:8080/in", "http://localhost:8080/in", "http://10.1.2.3/in"):
            assert _create(client, headers, url=url).status_code == 201, url
        assert _create(client, headers, url="file:///etc/passwd").status_code == 422  # never another scheme


def test_a_public_receiver_on_a_port_not_allowed_is_422_naming_the_port_and_those_allowed(settings_env):
    """Fault: a key holder registers (or moves an endpoint to) a public host's SMTP or database port. Pass: 422 at
    `url` naming the port and the allowed ones (80, 443 and WEBHOOK_ALLOWED_PORTS); nothing is stored."""
    from tests.support.api_app import migrated_client

    settings_env(WEBHOOK_ALLOWED_PORTS="9000,8443")
    with migrated_client() as client:
        from app.db.keys import create_key

        with session_scope() as session:
            _row, key = create_key(session, "acme")
        headers = {"Authorization": f"Bearer {key}"}
        refused = _create(client, headers, url="http://93.184.215.14:25/in")
        assert refused.status_code == 422, refused.text
        (error,) = refused.json()["detail"]
        assert error["loc"] == ["body", "url"]
        assert (
            "port 25 is not allowed for a receiver on a public address; allowed ports: 80, 443, 8443, 9000"
            in (error["msg"])
        )
        assert client.get("/v1/webhooks", headers=headers).json()["total"] == 0
        created = _create(client, headers, url="https://93.184.215.14:8443/in")
        assert created.status_code == 201, created.text
        route = f"/v1/webhooks/{created.json()['id']}"
        moved = client.patch(route, json={"url": "https://93.184.215.14:6379/in"}, headers=headers)
        assert moved.status_code == 422 and "port 6379 is not allowed" in moved.text
        assert client.get(route, headers=headers).json()["url"] == "https://93.184.215.14:8443/in"


@pytest.mark.parametrize(
    ("body", "loc", "says"),
    [
        ({"url": PUBLIC, "events": ["job.exploded"]}, ["body", "events"], "unknown event 'job.exploded'"),
        ({"url": PUBLIC, "events": []}, ["body", "events"], "at least 1 item"),
        ({"url": PUBLIC}, ["body", "events"], "Field required"),
        ({"events": ["job.failed"]}, ["body", "url"], "Field required"),
        ({"url": PUBLIC, "events": ["job.failed"], "secret": "whsec_mine"}, ["body", "secret"], "Extra inputs"),
        ({"url": PUBLIC, "events": ["job.failed"], "enabled": False}, ["body", "enabled"], "Extra inputs"),
    ],
)
def test_a_bad_body_is_refused_naming_the_field(client, alice, body, loc, says):
    response = client.post("/v1/webhooks", json=body, headers=alice)
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == loc and says in error["msg"], error


def test_another_owner_gets_404_everywhere_and_lists_nothing(client, alice, make_key):
    webhook = _create(client, alice).json()
    test = client.post(f"/v1/webhooks/{webhook['id']}/test", headers=alice)
    assert test.status_code == 202, test.text
    delivery = test.json()
    bob = make_key("bob")
    base = f"/v1/webhooks/{webhook['id']}"
    for method, route, body in (
        ("GET", base, None),
        ("PATCH", base, {"enabled": False}),
        ("DELETE", base, None),
        ("POST", f"{base}/rotate-secret", None),
        ("POST", f"{base}/test", None),
        ("GET", f"{base}/deliveries", None),
        ("GET", f"{base}/deliveries/{delivery['id']}", None),
        ("POST", f"{base}/deliveries/{delivery['id']}/redeliver", None),
    ):
        response = client.request(method, route, json=body, headers=bob)
        assert response.status_code == 404, (method, route, response.text)
        assert response.json()["detail"] == f"webhook {webhook['id']} not found"
    assert client.get("/v1/webhooks", headers=bob).json() == {"data": [], "total": 0, "limit": 50, "offset": 0}
    assert client.get(base, headers=alice).json()["enabled"] is True  # bob's PATCH changed nothing


def test_lists_page_newest_first(client, alice):
    ids = [_create(client, alice, description=f"n{i}").json()["id"] for i in range(5)]
    first = client.get("/v1/webhooks?limit=2", headers=alice).json()
    second = client.get("/v1/webhooks?limit=2&offset=2", headers=alice).json()
    assert first["total"] == 5 and (first["limit"], second["offset"]) == (2, 2)
    assert [w["id"] for w in first["data"] + second["data"]] == ids[::-1][:4]
    assert client.get("/v1/webhooks?limit=501", headers=alice).status_code == 422


def test_patch_changes_only_the_fields_given_and_checks_a_new_url(client, alice):
    webhook = _create(client, alice, description="first").json()
    route = f"/v1/webhooks/{webhook['id']}"
    patched = client.patch(route, json={"events": ["model.registered"], "enabled": False}, headers=alice)
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert (body["events"], body["enabled"], body["url"], body["description"]) == (
        ["model.registered"],
        False,
        PUBLIC,
        "first",
    )
    refused = client.patch(route, json={"url": "http://192.168.0.10/in"}, headers=alice)
    assert refused.status_code == 422 and "is a private address" in refused.text
    assert client.patch(route, json={"url": None}, headers=alice).status_code == 422  # null: leave it out instead
    assert client.patch(route, json={"description": None}, headers=alice).json()["description"] is None
    assert client.get(route, headers=alice).json()["url"] == PUBLIC


def test_a_disabled_endpoint_refuses_tests_and_redeliveries(client, alice):
    webhook = _create(client, alice).json()
    route = f"/v1/webhooks/{webhook['id']}"
    delivery = client.post(f"{route}/test", headers=alice).json()
    client.patch(route, json={"enabled": False}, headers=alice)
    refused = client.post(f"{route}/test", headers=alice)
    assert refused.status_code == 409 and "is disabled" in refused.json()["detail"]
    assert client.post(f"{route}/deliveries/{delivery['id']}/redeliver", headers=alice).status_code == 409


def test_a_test_event_is_a_delivery_like_any_and_a_redelivery_while_attempted_is_409(client, alice):
    webhook = _create(client, alice).json()
    route = f"/v1/webhooks/{webhook['id']}"
    delivery = client.post(f"{route}/test", headers=alice).json()
    assert (delivery["event_type"], delivery["status"], delivery["attempts"]) == ("webhook.test", "pending", 0)
    assert delivery["payload"]["type"] == "webhook.test" and delivery["payload"]["data"]["webhook_id"] == webhook["id"]
    assert delivery["message_id"].startswith("msg_") and delivery["webhook_id"] == webhook["id"]
    assert [d["id"] for d in _deliveries(client, alice, webhook["id"])] == [delivery["id"]]
    with session_scope() as session:  # a worker holds it, mid-attempt
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery["id"])
            .values(attempts=1, locked_until=utcnow() + timedelta(seconds=30))
        )
    busy = client.post(f"{route}/deliveries/{delivery['id']}/redeliver", headers=alice)
    assert busy.status_code == 409 and "is being attempted right now" in busy.json()["detail"]
    filtered = client.get(f"{route}/deliveries?status=succeeded", headers=alice).json()
    assert filtered["total"] == 0
    assert client.get(f"{route}/deliveries?status=bogus", headers=alice).status_code == 422
    deleted = client.delete(route, headers=alice)
    assert deleted.status_code == 204 and client.get(route, headers=alice).status_code == 404
    with session_scope() as session:  # its deliveries went with it
        assert session.scalars(select(WebhookDelivery)).all() == []


def test_an_owner_has_at_most_so_many_endpoints(client, alice):
    for _ in range(MAX_ENDPOINTS_PER_OWNER):
        assert _create(client, alice).status_code == 201
    refused = _create(client, alice)
    assert refused.status_code == 409 and "the most allowed" in refused.json()["detail"]


def test_registering_a_model_moving_an_alias_and_cancelling_a_job_record_their_events(client, alice, parallel_id):
    """Each route records one delivery per subscribed endpoint, in the transaction of the change it reports."""
    everything = _create(client, alice, events=["model.registered", "model.alias_moved", "job.cancelled"]).json()
    only_jobs = _create(client, alice, events=["job.cancelled"]).json()
    model_id = _model_row("alice")
    assert client.patch(f"/v1/models/{model_id}", json={"name": "en-de"}, headers=alice).status_code == 200
    moved = client.put("/v1/models/en-de/aliases/production", json={"version": 1}, headers=alice)
    assert moved.status_code == 200, moved.text
    job = client.post("/v1/jobs", json={"objective": "translation", "dataset_id": parallel_id}, headers=alice).json()
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=alice).status_code == 202
    events = {d["event_type"]: d["payload"] for d in _deliveries(client, alice, everything["id"])}
    assert set(events) == {"model.registered", "model.alias_moved", "job.cancelled"}
    registered = events["model.registered"]["data"]
    assert (registered["model_id"], registered["ref"], registered["link"]) == (
        model_id,
        "en-de@1",
        f"/v1/models/{model_id}",
    )
    alias = events["model.alias_moved"]["data"]
    assert (alias["ref"], alias["from_model_id"], alias["to_model_id"], alias["to_version"]) == (
        "en-de@production",
        None,
        model_id,
        1,
    )
    cancelled = events["job.cancelled"]["data"]
    assert (cancelled["job_id"], cancelled["status"], cancelled["link"]) == (
        job["id"],
        "cancelled",
        f"/v1/jobs/{job['id']}",
    )
    assert [d["event_type"] for d in _deliveries(client, alice, only_jobs["id"])] == ["job.cancelled"]


def test_the_cli_creates_lists_shows_deliveries_and_deletes_endpoints(cli, alice, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_API_KEY", alice["Authorization"].removeprefix("Bearer "))
    code, out, err = cli("webhook-create", PUBLIC, "--event", "job.succeeded", "--event", "job.failed")
    assert code == 0, err
    secret = out.strip()
    assert secret.startswith("whsec_") and "shown only this once" in err
    code, out, _ = cli("webhooks", "--json")
    (webhook,) = [json.loads(line) for line in out.splitlines()]
    assert webhook["events"] == ["job.succeeded", "job.failed"] and "secret" not in webhook
    code, out, _ = cli("webhooks")
    assert out.splitlines()[0].split() == ["ID", "URL", "EVENTS", "ENABLED", "DESCRIPTION", "CREATED"]
    assert webhook["id"] in out and "job.succeeded,job.failed" in out
    code, out, _ = cli("webhook-test", webhook["id"])
    delivery_id = out.strip()
    code, out, _ = cli("webhook-deliveries", webhook["id"])
    assert code == 0 and delivery_id in out and "webhook.test" in out and "pending" in out
    code, out, _ = cli("webhook-update", webhook["id"], "--disable")
    assert code == 0 and " no " in out
    code, _out, err = cli("webhook-create", "http://127.0.0.1:9000/in", "--event", "job.failed")
    assert code == 1 and "error 422: url: url 'http://127.0.0.1:9000/in': host '127.0.0.1' is a loopback" in err
    code, _out, err = cli("webhook-create", PUBLIC, "--event", "job.exploded")
    assert code == 2 and "invalid choice: 'job.exploded'" in err
    code, out, _ = cli("delete", "webhook", webhook["id"])
    assert code == 0 and out.strip() == f"deleted webhook {webhook['id']}"
    code, _out, err = cli("webhook-deliveries", webhook["id"])
    assert code == 1 and f"error 404: webhook {webhook['id']} not found" in err


def test_a_dataset_parsed_or_failed_records_its_event(client, alice):
    """The data queue's work (run here) moves a dataset to ready or failed and records dataset.ready or
    dataset.failed for the endpoints that asked, in the same transaction."""
    from tests.api.test_datasets import _jsonl, _ready

    endpoint = _create(client, alice, events=["dataset.ready", "dataset.failed"]).json()
    ready = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]), name="numbers")
    failed = _ready(client, alice, b"one\teins\nno tab here\n", filename="bad.tsv", name="broken")
    events = {d["event_type"]: d["payload"]["data"] for d in _deliveries(client, alice, endpoint["id"])}
    assert set(events) == {"dataset.ready", "dataset.failed"}
    assert (events["dataset.ready"]["dataset_id"], events["dataset.ready"]["rows"]) == (ready["id"], 2)
    assert events["dataset.ready"]["link"] == f"/v1/datasets/{ready['id']}"
    assert (events["dataset.failed"]["dataset_id"], events["dataset.failed"]["error_line"]) == (failed["id"], 2)
    assert "2 tab-separated columns" in events["dataset.failed"]["error"]


def test_the_dashboards_form_offers_every_event_the_api_accepts():
    """app/dashboard/webhooks.js lists the events its form offers: the API's list, in its order."""
    import re
    from pathlib import Path

    from app.schemas.webhooks import EVENT_TYPES

    script = (Path(__file__).parents[2] / "app" / "dashboard" / "webhooks.js").read_text()
    listed = re.search(r"export const EVENT_TYPES = \[(.*?)\];", script, re.S)
    assert listed is not None
    assert tuple(re.findall(r'"([^"]+)"', listed.group(1))) == EVENT_TYPES
