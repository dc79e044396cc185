"""Webhook events: what the service tells an owner's endpoints, and `emit`, the one call that reports one.

Emitting costs the work it reports one SELECT of the owner's endpoints and one INSERT per endpoint that wants the
event; after the commit each delivery's id goes to this process's sender thread, which sends its task message, so
neither the receiver nor the broker is ever waited for (the HTTP request is a worker's: worker/tasks/webhook.py).
Nothing an emit meets reaches the caller: a database error is logged and the event lost; a broker away only delays
it (the delivery row is there, and the reaper sends its message).

Payloads have the Standard Webhooks shape, `{"type", "timestamp", "data"}`, and are signed per attempt with the
endpoint's secret (`sign`): headers `webhook-id` (the message's id, the same on every attempt), `webhook-timestamp`
(the attempt's Unix time) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "id.timestamp.body">`).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import queue
import secrets
import threading
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session
from standardwebhooks.webhooks import Webhook

from app.core.settings import get_settings
from app.core.task_names import DELIVER_WEBHOOK, WEBHOOK_QUEUE
from app.db import webhook_rows
from app.db.background_tables import Evaluation
from app.db.base import new_id, utcnow
from app.db.pipeline_tables import Pipeline
from app.db.session import begin_before_savepoint, session_scope
from app.db.tables import Job, TrainedModel
from app.db.webhook_tables import WebhookDelivery, WebhookEndpoint
from app.schemas.webhooks import EVENT_TYPES, TEST_EVENT
from app.services.queueing import get_sender

log = logging.getLogger(__name__)

JOB_EVENTS = {"succeeded": "job.succeeded", "failed": "job.failed", "cancelled": "job.cancelled"}
EVALUATION_EVENTS = {"succeeded": "evaluation.completed", "failed": "evaluation.failed"}
PIPELINE_EVENTS = {"succeeded": "pipeline.succeeded", "failed": "pipeline.failed", "cancelled": "pipeline.cancelled"}
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # Standard Webhooks: 24 to 64 bytes of randomness
_UNSENT = "webhooks.unsent"  # session.info: the deliveries a session inserted, to send once it commits


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def message_id() -> str:
    return f"msg_{new_id().replace('-', '')}"


def body(event_type: str, data: dict[str, Any], at: datetime | None = None) -> str:
    """The payload as sent and signed: compact JSON, ASCII only."""
    timestamp = (at or utcnow()).astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"type": event_type, "timestamp": timestamp, "data": data}, separators=(",", ":"))


def sign(keys: list[str], msg_id: str, at: datetime, payload: str) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt at `at`, a signature per secret (the new one and, for a day
    after a rotation, the previous one), separated by spaces as the specification allows."""
    at = at.astimezone(UTC)
    signatures = " ".join(Webhook(key).sign(msg_id, at, payload) for key in keys)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signatures,
        "Content-Type": "application/json",
    }


def emit(session: Session | None, owner_id: str, event_type: str, data: dict[str, Any]) -> list[str]:
    """Report `event_type` with `data` to every enabled endpoint of `owner_id` that subscribed to it; returns the
    new deliveries' ids (none when no endpoint wants it, or when anything failed: logged, never raised).

    session: the caller's, inside the transaction that makes the change the event reports, so the two commit
    together (the deliveries go in a SAVEPOINT, and a failure there leaves the caller's transaction as it was);
    their messages are sent once that session commits. None: a session of its own, committed and sent at once."""
    if event_type not in EVENT_TYPES:
        log.error("webhook event %r is not one of %s: not emitted", event_type, ", ".join(EVENT_TYPES))
        return []
    if session is None:
        try:
            with session_scope() as own:
                ids = _insert(own, owner_id, event_type, data)
        except Exception:
            log.exception("webhook event %s of owner %s not recorded", event_type, owner_id)
            return []
        send(ids)
        return ids
    session.flush()  # the caller's own changes: their errors stay the caller's, as at its commit
    try:
        begin_before_savepoint(session)
        with session.begin_nested():
            ids = _insert(session, owner_id, event_type, data)
    except Exception:
        log.exception("webhook event %s of owner %s not recorded", event_type, owner_id)
        return []
    if ids:
        _send_on_commit(session, ids)
    return ids


def emit_test(session: Session, endpoint: WebhookEndpoint) -> str:
    """A `webhook.test` event to this endpoint alone; returns its delivery's id (sent once the session commits)."""
    data = {"webhook_id": endpoint.id, "message": "a test event from the Transformer service"}
    delivery = _delivery(endpoint, message_id(), TEST_EVENT, body(TEST_EVENT, data))
    session.add(delivery)
    session.flush()
    _send_on_commit(session, [delivery.id])
    return delivery.id


def _delivery(endpoint: WebhookEndpoint, msg_id: str, event_type: str, payload: str) -> WebhookDelivery:
    now = utcnow()
    return WebhookDelivery(
        id=new_id(),
        endpoint_id=endpoint.id,
        message_id=msg_id,
        event_type=event_type,
        payload=payload,
        status=webhook_rows.PENDING,
        attempts=0,
        max_attempts=1 + len(get_settings().webhook_retry_schedule),
        next_attempt_at=now,
        task_due_at=now,  # sent at once; if that fails, the reaper sends it after WEBHOOK_REDISPATCH_SECONDS
        created_at=now,
        updated_at=now,
    )


def _insert(session: Session, owner_id: str, event_type: str, data: dict[str, Any]) -> list[str]:
    endpoints = session.scalars(
        select(WebhookEndpoint).where(WebhookEndpoint.owner_id == owner_id, WebhookEndpoint.enabled.is_(True))
    ).all()
    wanted = [endpoint for endpoint in endpoints if event_type in endpoint.events]
    if not wanted:
        return []
    msg_id, payload = message_id(), body(event_type, data)
    deliveries = [_delivery(endpoint, msg_id, event_type, payload) for endpoint in wanted]
    session.add_all(deliveries)
    session.flush()
    return [delivery.id for delivery in deliveries]


def send(delivery_ids: list[str], countdown: float | None = None) -> None:
    """Have each delivery's task sent to the webhooks queue (held `countdown` seconds by the worker that takes it).
    This process's sender thread sends them: the caller never waits for the broker, which costs seconds when it is
    away. A message not sent (a broker away, a process that ended first) is sent by the reaper once its delivery is
    WEBHOOK_REDISPATCH_SECONDS overdue: the rows, not the messages, are the truth."""
    try:
        outbox = _outbox()
    except Exception:  # no thread to be had (an exhausted host): the reaper sends them
        log.exception("webhook deliveries %s: their messages were not queued; the reaper sends them", delivery_ids)
        return
    for delivery_id in delivery_ids:
        outbox.put((delivery_id, countdown))


_sender: tuple[int, queue.Queue[tuple[str, float | None]]] | None = None  # (the process's pid, its outbox)
_sender_lock = threading.Lock()


def drain(timeout: float = 2.0) -> bool:
    """Whether this process's sender has sent every message it was given, waiting up to `timeout` seconds. For a
    caller about to change the settings the sender reads (the tests, between two environments): a send under way
    then could cache the settings of the environment being left."""
    if _sender is None or _sender[0] != os.getpid():
        return True  # no sender in this process (a forked one's is its parent's)
    outbox = _sender[1]
    with outbox.all_tasks_done:  # the queue's own count of messages put and not yet done
        return outbox.all_tasks_done.wait_for(lambda: outbox.unfinished_tasks == 0, timeout)


def _outbox() -> queue.Queue[tuple[str, float | None]]:
    """This process's outbox, and its sender thread started the first time (a forked worker starts its own)."""
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid():
            outbox: queue.Queue[tuple[str, float | None]] = queue.Queue()
            threading.Thread(target=_send_forever, args=(outbox,), name="webhook-sender", daemon=True).start()
            _sender = (os.getpid(), outbox)
        return _sender[1]


def _send_forever(outbox: queue.Queue[tuple[str, float | None]]) -> None:
    while True:
        delivery_id, countdown = outbox.get()
        try:
            get_sender().send_task(
                DELIVER_WEBHOOK,
                args=[delivery_id],
                queue=WEBHOOK_QUEUE,
                countdown=countdown,
                retry=False,
                ignore_result=True,
            )
        except Exception as exc:
            log.warning(
                "webhook delivery %s: its message was not sent (%s: %s); the reaper sends it",
                delivery_id,
                type(exc).__name__,
                exc,
            )
        finally:
            outbox.task_done()


def _send_on_commit(session: Session, delivery_ids: list[str]) -> None:
    """Send these deliveries' messages after the session's next commit (never before: a worker must find the rows);
    a rollback drops them (a row that was kept anyway is sent by the reaper)."""
    if _UNSENT not in session.info:
        event.listen(session, "after_commit", _after_commit)
        event.listen(session, "after_rollback", _after_rollback)
        session.info[_UNSENT] = []
    session.info[_UNSENT].extend(delivery_ids)


def _after_commit(session: Session) -> None:
    if session.in_nested_transaction():  # a SAVEPOINT released: the transaction itself has not committed yet
        return
    unsent, session.info[_UNSENT] = session.info[_UNSENT], []
    send(unsent)


def _after_rollback(session: Session) -> None:
    if not session.in_nested_transaction():
        session.info[_UNSENT] = []


# The events' data: ids, status, names and the route that reads the object.


def job_data(job: Job, status: str, *, error: str | None = None, model_id: str | None = None) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "name": job.name,
        "status": status,
        "objective": job.objective,
        "dataset_id": job.dataset_id,
        "sweep_id": job.sweep_id,
        "model_id": model_id,
        "error": error,
        "link": f"/v1/jobs/{job.id}",
    }


def emit_job(
    session: Session | None, job: Job, status: str, *, error: str | None = None, model_id: str | None = None
) -> list[str]:
    """job.succeeded, job.failed or job.cancelled for a job that has just reached `status` (others: nothing)."""
    event_type = JOB_EVENTS.get(status)
    if event_type is None:
        return []
    return emit(session, job.owner_id, event_type, job_data(job, status, error=error, model_id=model_id))


def emit_evaluation(session: Session, evaluation_id: str) -> list[str]:
    """evaluation.completed or evaluation.failed for an evaluation that has just ended (as stored now)."""
    evaluation = session.get(Evaluation, evaluation_id, populate_existing=True)
    if evaluation is None or evaluation.status not in EVALUATION_EVENTS:
        return []
    scores = {
        name: value["score"]
        for name, value in (evaluation.scores or {}).items()
        if isinstance(value, dict) and "score" in value
    }
    data = {
        "evaluation_id": evaluation.id,
        "status": evaluation.status,
        "model_id": evaluation.model_id,
        "dataset_id": evaluation.dataset_id,
        "job_id": evaluation.job_id,
        "scores": scores or None,
        "error": evaluation.error,
        "link": f"/v1/models/{evaluation.model_id}/evaluations/{evaluation.id}",
    }
    return emit(session, evaluation.owner_id, EVALUATION_EVENTS[evaluation.status], data)


def emit_pipeline(session: Session, pipeline: Pipeline) -> list[str]:
    """pipeline.succeeded, pipeline.failed or pipeline.cancelled for a pipeline that has just ended (as set now)."""
    event_type = PIPELINE_EVENTS.get(pipeline.status)
    if event_type is None:
        return []
    data = {
        "pipeline_id": pipeline.id,
        "name": pipeline.name,
        "kind": pipeline.kind,
        "status": pipeline.status,
        "model_id": pipeline.model_id,
        "error": pipeline.error,
        "link": f"/v1/pipelines/{pipeline.id}",
    }
    return emit(session, pipeline.owner_id, event_type, data)


def emit_model_registered(session: Session, model: TrainedModel) -> list[str]:
    data = {
        "model_id": model.id,
        "name": model.name,
        "version": model.version,
        "ref": f"{model.name}@{model.version}",
        "job_id": model.job_id,
        "link": f"/v1/models/{model.id}",
    }
    return emit(session, model.owner_id, "model.registered", data)


def emit_alias_moved(
    session: Session, owner_id: str, name: str, alias: str, before: TrainedModel | None, after: TrainedModel | None
) -> list[str]:
    """An alias created (`from_*` null), moved, or removed (`to_*` null)."""
    data = {
        "name": name,
        "alias": alias,
        "ref": f"{name}@{alias}",
        "from_model_id": before.id if before else None,
        "from_version": before.version if before else None,
        "to_model_id": after.id if after else None,
        "to_version": after.version if after else None,
        "link": f"/v1/models/{name}/aliases/{alias}",
    }
    return emit(session, owner_id, "model.alias_moved", data)
