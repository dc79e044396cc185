"""Schemas of webhooks: the endpoints an owner registers, and the deliveries of events to them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from app.schemas.common import Input, Output

# What an endpoint may subscribe to (docs/api.md, "Webhooks", says what each carries).
EVENT_TYPES = (
    "job.succeeded",
    "job.failed",
    "job.cancelled",
    "evaluation.completed",
    "evaluation.failed",
    "dataset.ready",
    "dataset.failed",
    "model.registered",
    "model.alias_moved",
    "pipeline.succeeded",
    "pipeline.failed",
    "pipeline.cancelled",
)
TEST_EVENT = "webhook.test"  # POST /v1/webhooks/{id}/test: to that endpoint alone, whatever it subscribed to
DeliveryStatus = Literal["pending", "retrying", "succeeded", "failed"]


def _check_events(events: list[str]) -> list[str]:
    unknown = [e for e in events if e not in EVENT_TYPES]
    if unknown:
        raise ValueError(f"unknown event {unknown[0]!r}; the events are {', '.join(EVENT_TYPES)}")
    return list(dict.fromkeys(events))  # duplicates dropped, order kept


Events = Annotated[
    list[str], Field(min_length=1, max_length=50, description="event types: " + ", ".join(EVENT_TYPES)),
    AfterValidator(_check_events),
]  # fmt: skip
Url = Annotated[str, Field(min_length=1, max_length=2000, description="http(s) URL of a public receiver")]
Description = Annotated[str, Field(max_length=500)]


class WebhookCreate(Input):
    url: Url
    events: Events
    description: Description | None = None


class WebhookUpdate(Input):
    """PATCH /v1/webhooks/{id}: only the fields given change (`description` null clears it)."""

    url: Url | None = None
    events: Events | None = None
    enabled: bool | None = None
    description: Description | None = None

    @field_validator("url", "events", "enabled")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("may be left out, not null")
        return value


class WebhookPublic(Output):
    id: str
    url: str
    events: list[str]
    description: str | None
    enabled: bool
    created_at: datetime
    updated_at: datetime


class WebhookWithSecret(WebhookPublic):
    """The answer of a creation or a secret rotation: the only time the secret is shown."""

    secret: str = Field(description="whsec_ + base64: verify each delivery's webhook-signature with it; shown once")


class DeliveryPublic(Output):
    id: str
    webhook_id: str
    message_id: str = Field(description="the webhook-id header: the same on every attempt")
    event_type: str
    status: DeliveryStatus
    attempts: int
    max_attempts: int
    last_status_code: int | None
    last_latency_ms: float | None
    last_error: str | None
    next_attempt_at: datetime | None
    payload: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @field_validator("payload", mode="before")
    @classmethod
    def _parsed(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value
