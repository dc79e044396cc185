"""Webhooks: an owner's endpoints (register, list, read, change, delete, rotate the secret, send a test event) and
the deliveries of events to each (list, redeliver). Another owner's endpoint is 404, as an unknown one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import not_found
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import AdminKey
from app.db.webhook_tables import WebhookDelivery, WebhookEndpoint
from app.schemas.common import Page
from app.schemas.webhooks import (
    DeliveryPublic,
    DeliveryStatus,
    WebhookCreate,
    WebhookPublic,
    WebhookUpdate,
    WebhookWithSecret,
)
from app.services import webhook_endpoints

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Not found"}}
REFUSED: dict[int | str, dict[str, Any]] = {
    400: {"description": "Body is not UTF-8 JSON"},
    422: {"description": "Not an http(s) URL of a public host (named with why), an unknown event"},
}
DISABLED: dict[int | str, dict[str, Any]] = {409: {"description": "The endpoint is disabled"}}


def owned_endpoint(session: Session, webhook_id: str, owner_id: str) -> WebhookEndpoint:
    endpoint = session.get(WebhookEndpoint, webhook_id)
    if endpoint is None or endpoint.owner_id != owner_id:
        raise not_found("webhook", webhook_id)
    return endpoint


def public(endpoint: WebhookEndpoint) -> WebhookPublic:
    return WebhookPublic.model_validate(endpoint)


def with_secret(endpoint: WebhookEndpoint, secret: str) -> WebhookWithSecret:
    return WebhookWithSecret(**public(endpoint).model_dump(), secret=secret)


def delivery_public(delivery: WebhookDelivery) -> DeliveryPublic:
    return DeliveryPublic(
        id=delivery.id,
        webhook_id=delivery.endpoint_id,
        message_id=delivery.message_id,
        event_type=delivery.event_type,
        status=delivery.status,  # type: ignore[arg-type]  # one of DeliveryStatus, written by app/db/webhook_rows.py
        attempts=delivery.attempts,
        max_attempts=delivery.max_attempts,
        last_status_code=delivery.last_status_code,
        last_latency_ms=delivery.last_latency_ms,
        last_error=delivery.last_error,
        next_attempt_at=delivery.next_attempt_at,
        payload=delivery.payload,  # type: ignore[arg-type]  # the JSON text as sent, parsed by the schema
        created_at=delivery.created_at,
        updated_at=delivery.updated_at,
    )


@router.post("", response_model=WebhookWithSecret, status_code=status.HTTP_201_CREATED, responses=REFUSED)
def create_webhook(
    body: WebhookCreate, session: SessionDep, settings: SettingsDep, key: AdminKey, request: Request
) -> WebhookWithSecret:
    """Register an endpoint for the events listed. The answer holds its signing secret, which is never shown again
    (`rotate-secret` makes a new one)."""
    details = {"url": body.url, "events": list(body.events)}
    audit.record(session, key, request, "webhook.created", "webhook", WebhookEndpoint, details)
    endpoint, secret = webhook_endpoints.create(session, settings, key.owner_id, body)
    return with_secret(endpoint, secret)


@router.get("", response_model=Page[WebhookPublic])
def list_webhooks(session: SessionDep, key: AdminKey, limit: Limit = 50, offset: Offset = 0) -> Page[WebhookPublic]:
    query = select(WebhookEndpoint).where(WebhookEndpoint.owner_id == key.owner_id)
    return paginate(session, query, (WebhookEndpoint.created_at.desc(), WebhookEndpoint.id), limit, offset, public)


@router.get("/{webhook_id}", response_model=WebhookPublic, responses=NOT_FOUND)
def read_webhook(webhook_id: str, session: SessionDep, key: AdminKey) -> WebhookPublic:
    return public(owned_endpoint(session, webhook_id, key.owner_id))


@router.patch("/{webhook_id}", response_model=WebhookPublic, responses={**NOT_FOUND, **REFUSED})
def update_webhook(
    webhook_id: str, body: WebhookUpdate, session: SessionDep, settings: SettingsDep, key: AdminKey, request: Request
) -> WebhookPublic:
    """Change the URL, the events, `enabled` or the description: only the fields given change. A disabled endpoint
    gets no new deliveries, and those still due when it was disabled fail at their next attempt."""
    endpoint = owned_endpoint(session, webhook_id, key.owner_id)
    details = body.model_dump(mode="json", exclude_unset=True)
    audit.record(session, key, request, "webhook.updated", "webhook", endpoint.id, details)
    return public(webhook_endpoints.update(session, settings, endpoint, body))


@router.delete("/{webhook_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
def delete_webhook(webhook_id: str, session: SessionDep, key: AdminKey, request: Request) -> Response:
    """The endpoint and its deliveries (one being attempted ends, unrecorded)."""
    endpoint = owned_endpoint(session, webhook_id, key.owner_id)
    session.delete(endpoint)
    audit.record(session, key, request, "webhook.deleted", "webhook", webhook_id, {"url": endpoint.url})
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{webhook_id}/rotate-secret", response_model=WebhookWithSecret, responses=NOT_FOUND)
def rotate_secret(webhook_id: str, session: SessionDep, key: AdminKey, request: Request) -> WebhookWithSecret:
    """A new signing secret, shown once. For 24 hours deliveries carry a signature by the previous secret too."""
    endpoint = owned_endpoint(session, webhook_id, key.owner_id)
    audit.record(session, key, request, "webhook.secret_rotated", "webhook", endpoint.id)  # never the secret
    secret = webhook_endpoints.rotate_secret(session, endpoint)
    return with_secret(endpoint, secret)


@router.post(
    "/{webhook_id}/test",
    response_model=DeliveryPublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**NOT_FOUND, **DISABLED},
)
def send_test_event(webhook_id: str, session: SessionDep, key: AdminKey, request: Request) -> DeliveryPublic:
    """Send a `webhook.test` event to this endpoint (a delivery like any other, retried alike)."""
    endpoint = owned_endpoint(session, webhook_id, key.owner_id)
    audit.record(session, key, request, "webhook.tested", "webhook", endpoint.id)
    delivery_id = webhook_endpoints.send_test(session, endpoint)
    delivery = session.get(WebhookDelivery, delivery_id)
    assert delivery is not None  # just committed
    return delivery_public(delivery)


@router.get("/{webhook_id}/deliveries", response_model=Page[DeliveryPublic], responses=NOT_FOUND)
def list_deliveries(
    webhook_id: str,
    session: SessionDep,
    key: AdminKey,
    status_filter: Annotated[DeliveryStatus | None, Query(alias="status")] = None,
    event_type: Annotated[str | None, Query(max_length=50)] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[DeliveryPublic]:
    """The endpoint's deliveries, newest first."""
    endpoint = owned_endpoint(session, webhook_id, key.owner_id)
    query = select(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint.id)
    if status_filter:
        query = query.where(WebhookDelivery.status == status_filter)
    if event_type:
        query = query.where(WebhookDelivery.event_type == event_type)
    order = (WebhookDelivery.created_at.desc(), WebhookDelivery.id)
    return paginate(session, query, order, limit, offset, delivery_public)


@router.get("/{webhook_id}/deliveries/{delivery_id}", response_model=DeliveryPublic, responses=NOT_FOUND)
def read_delivery(webhook_id: str, delivery_id: str, session: SessionDep, key: AdminKey) -> DeliveryPublic:
    return delivery_public(owned_delivery(session, webhook_id, delivery_id, key.owner_id))


def owned_delivery(session: Session, webhook_id: str, delivery_id: str, owner_id: str) -> WebhookDelivery:
    endpoint = owned_endpoint(session, webhook_id, owner_id)
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None or delivery.endpoint_id != endpoint.id:
        raise not_found("delivery", delivery_id)
    return delivery


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/redeliver",
    response_model=DeliveryPublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**NOT_FOUND, 409: {"description": "The endpoint is disabled, or an attempt is being made now"}},
)
def redeliver(
    webhook_id: str, delivery_id: str, session: SessionDep, key: AdminKey, request: Request
) -> DeliveryPublic:
    """A new attempt now, with the same webhook-id. A delivery that had ended (succeeded or failed) gets this one
    attempt more; one still retrying keeps its schedule from here."""
    delivery = owned_delivery(session, webhook_id, delivery_id, key.owner_id)
    details = {"delivery_id": delivery.id, "event_type": delivery.event_type}
    audit.record(session, key, request, "webhook.redelivered", "webhook", webhook_id, details)
    webhook_endpoints.redeliver(session, owned_endpoint(session, webhook_id, key.owner_id), delivery)
    session.refresh(delivery)
    return delivery_public(delivery)
