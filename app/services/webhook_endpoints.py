"""What the webhook routes do: register, change and rotate an owner's endpoints, redeliver, send a test event.

A URL is checked by the SSRF guard (app/services/webhook_http.py) whenever it is given; a refusal is a 422 at `url`
naming the URL and why. The secret is made here and returned once, by creation and by rotation.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.db import webhook_rows
from app.db.base import utcnow
from app.db.webhook_tables import WebhookDelivery, WebhookEndpoint
from app.schemas.webhooks import WebhookCreate, WebhookUpdate
from app.services import webhooks
from app.services.errors import Conflict, InvalidField
from app.services.webhook_http import UnsafeTarget, check_url

MAX_ENDPOINTS_PER_OWNER = 20  # every event fans out to each subscribed endpoint
PREVIOUS_SECRET_HOURS = 24  # after a rotation, deliveries are signed with both secrets this long


def _check_url(url: str, settings: Settings) -> None:
    try:
        check_url(url, settings.webhook_allow_private, settings.webhook_allowed_ports)
    except UnsafeTarget as exc:
        raise InvalidField("url", str(exc)) from exc


def create(session: Session, settings: Settings, owner_id: str, body: WebhookCreate) -> tuple[WebhookEndpoint, str]:
    """A new endpoint of the owner's, enabled, with a new secret; returns it with the secret. Commits."""
    _check_url(body.url, settings)
    count = session.scalar(select(func.count()).where(WebhookEndpoint.owner_id == owner_id))
    if count is not None and count >= MAX_ENDPOINTS_PER_OWNER:
        raise Conflict(f"you have {count} webhook endpoints, the most allowed; delete one first")
    now, secret = utcnow(), webhooks.new_secret()
    endpoint = WebhookEndpoint(
        owner_id=owner_id,
        url=body.url,
        events=body.events,
        description=body.description,
        enabled=True,
        secret=secret,
        created_at=now,
        updated_at=now,
    )
    session.add(endpoint)
    session.commit()
    return endpoint, secret


def update(session: Session, settings: Settings, endpoint: WebhookEndpoint, body: WebhookUpdate) -> WebhookEndpoint:
    """Only the fields given change; a new URL is checked as at creation. Deliveries not yet sent go to the endpoint
    as it is when they are attempted. Commits."""
    given = body.model_fields_set
    if "url" in given and body.url is not None:
        _check_url(body.url, settings)
        endpoint.url = body.url
    if "events" in given and body.events is not None:
        endpoint.events = body.events
    if "enabled" in given and body.enabled is not None:
        endpoint.enabled = body.enabled
    if "description" in given:
        endpoint.description = body.description
    endpoint.updated_at = utcnow()
    session.commit()
    return endpoint


def rotate_secret(session: Session, endpoint: WebhookEndpoint) -> str:
    """A new secret; the previous one still signs (beside it) for PREVIOUS_SECRET_HOURS. Returns it. Commits."""
    now, secret = utcnow(), webhooks.new_secret()
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_expires_at = now + timedelta(hours=PREVIOUS_SECRET_HOURS)
    endpoint.secret, endpoint.updated_at = secret, now
    session.commit()
    return secret


def redeliver(session: Session, endpoint: WebhookEndpoint, delivery: WebhookDelivery) -> None:
    """A new attempt of the delivery now (the same webhook-id), its message sent after the commit. Commits."""
    if not endpoint.enabled:
        raise Conflict(f'webhook {endpoint.id} is disabled; enable it first (PATCH {{"enabled": true}})')
    if not webhook_rows.redeliver(session, delivery.id):
        session.rollback()
        raise Conflict(f"delivery {delivery.id} is being attempted right now; ask again in a few seconds")
    session.commit()
    webhooks.send([delivery.id])


def send_test(session: Session, endpoint: WebhookEndpoint) -> str:
    """A `webhook.test` event to this endpoint alone; returns its delivery's id. Commits (and then sends)."""
    if not endpoint.enabled:
        raise Conflict(f'webhook {endpoint.id} is disabled; enable it first (PATCH {{"enabled": true}})')
    delivery_id = webhooks.emit_test(session, endpoint)
    session.commit()
    return delivery_id
