"""The webhook task: one attempt of one delivery, its outcome recorded, its next attempt scheduled.

The task takes a delivery id and re-reads the row. An attempt claims the delivery first (app/db/webhook_rows.py), so
a message delivered twice, or the reaper's and a countdown's for the same attempt, sends it once: the second finds
it locked, not due or over, and returns. The endpoint is read at the attempt: its URL, secret and `enabled` as
they are then. A retry due within COUNTDOWN_MAX_SECONDS is sent back to the queue with a countdown; a later one is
left to the reaper, which sends it when it is due (worker/reaper.py), so no message waits hours in a worker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from celery import shared_task

from app.core.settings import get_settings
from app.core.task_names import DELIVER_WEBHOOK
from app.db import webhook_rows
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.webhook_tables import WebhookDelivery, WebhookEndpoint
from app.services import webhooks
from app.services.webhook_http import Answer, post

log = logging.getLogger(__name__)
COUNTDOWN_MAX_SECONDS = 60.0
LOCK_MARGIN_SECONDS = 30.0  # an attempt holds its delivery for the timeout and this much more


@dataclass(frozen=True)
class Attempt:
    """What one attempt did: its number, the receiver's answer, and the wait before the next (None: no more)."""

    number: int
    answer: Answer
    retry_in: float | None


@dataclass(frozen=True)
class _Claimed:
    number: int
    url: str
    keys: list[str]
    message_id: str
    payload: str
    max_attempts: int


def _claim(delivery_id: str) -> _Claimed | None:
    settings = get_settings()
    with session_scope() as session:
        delivery = session.get(WebhookDelivery, delivery_id)
        endpoint = session.get(WebhookEndpoint, delivery.endpoint_id) if delivery is not None else None
        if delivery is None or endpoint is None:
            log.info("webhook delivery %s is gone (its endpoint was deleted); nothing to do", delivery_id)
            return None
        if not endpoint.enabled:
            if webhook_rows.give_up(session, delivery_id, "not sent: the endpoint is disabled"):
                log.info("webhook delivery %s: endpoint %s is disabled; failed unsent", delivery_id, endpoint.id)
            return None
        number = webhook_rows.claim(session, delivery_id, settings.webhook_timeout_seconds + LOCK_MARGIN_SECONDS)
        if number is None:
            log.info("webhook delivery %s is not due, being attempted or over; nothing to do", delivery_id)
            return None
        keys = [endpoint.secret]
        expires = endpoint.previous_secret_expires_at
        if endpoint.previous_secret and expires is not None and expires > utcnow():
            keys.append(endpoint.previous_secret)  # a rotation less than a day ago: the old secret signs too
        return _Claimed(number, endpoint.url, keys, delivery.message_id, delivery.payload, delivery.max_attempts)


def deliver(delivery_id: str) -> Attempt | None:
    """One attempt of the delivery if it is due (None: nothing to do), recorded; a retry within
    COUNTDOWN_MAX_SECONDS is sent with a countdown."""
    settings = get_settings()
    claimed = _claim(delivery_id)
    if claimed is None:
        return None
    headers = webhooks.sign(claimed.keys, claimed.message_id, utcnow(), claimed.payload)
    answer = post(
        claimed.url,
        claimed.payload.encode(),
        headers,
        settings.webhook_allow_private,
        settings.webhook_timeout_seconds,
        settings.webhook_allowed_ports,
    )
    wait = None
    if not answer.ok:
        wait = webhook_rows.next_wait(claimed.number, claimed.max_attempts, settings.webhook_retry_schedule)
    retry_at = utcnow() + timedelta(seconds=wait) if wait is not None else None
    countdown = wait is not None and wait <= COUNTDOWN_MAX_SECONDS
    with session_scope() as session:
        recorded = webhook_rows.record(
            session,
            delivery_id,
            claimed.number,
            succeeded=answer.ok,
            status_code=answer.status,
            latency_ms=answer.latency_ms,
            error=answer.error,
            retry_at=retry_at,
            task_due_at=retry_at if countdown else None,
        )
    outcome = "succeeded" if answer.ok else f"retry in {wait:g} s" if wait is not None else "failed, no retry left"
    if not recorded:  # deleted meanwhile, or taken by another attempt after this one outlived its lock
        log.warning("webhook delivery %s: attempt %d not recorded (%s)", delivery_id, claimed.number, outcome)
        return Attempt(claimed.number, answer, None)
    log.info(
        "webhook delivery %s: attempt %d: %s in %.0f ms: %s",
        delivery_id,
        claimed.number,
        answer.status or answer.error,
        answer.latency_ms,
        outcome,
    )
    if countdown and wait is not None:
        webhooks.send([delivery_id], countdown=wait)
    return Attempt(claimed.number, answer, wait)


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=DELIVER_WEBHOOK, acks_late=True, reject_on_worker_lost=True, ignore_result=True, time_limit=300
)
def deliver_webhook(delivery_id: str) -> None:
    """Idempotent by id: a message for a delivery that is not due, being attempted or over does nothing."""
    deliver(delivery_id)
