"""What a service refuses or fails at, with no HTTP in it: app/main.py answers each one in one place.

Services (and the worker, through the modules it shares with the API) must not import FastAPI or Starlette, yet
their refusals reach callers as HTTP answers whose shape is fixed: each kind below carries the status it is
answered with, its `detail` (the JSON body's only field, as FastAPI's own errors have it) and its headers
(Retry-After where waiting helps). A router that needs to tell kinds apart catches the class, not a number.
"""

from __future__ import annotations

from typing import Any

BACKEND_RETRY_SECONDS = 10  # a decoding backend that failed: the same request may succeed a little later


def validation_detail(loc: list[str], message: str) -> list[dict[str, Any]]:
    """FastAPI's validation-error shape for one value that parsed but makes no sense: `loc` is where it was, e.g.
    ["body", "training", "devices"] or ["query", "step"]."""
    return [{"loc": loc, "msg": message, "type": "value_error"}]


class ServiceError(Exception):
    """Base of the refusals and failures a service raises; `status` is the HTTP status the API answers with."""

    status = 500

    def __init__(self, detail: Any, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers: dict[str, str] | None = None if retry_after is None else {"Retry-After": str(retry_after)}


class InvalidField(ServiceError):
    """422: a request field that parsed but cannot be served, named as FastAPI names a field that did not parse."""

    status = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(validation_detail(["body", *field.split(".")] if field else ["body"], message))
        self.field, self.message = field, message


class Forbidden(ServiceError):
    """403: the caller's key may not do this (a scope it lacks, a member it does not act for); the detail says why."""

    status = 403

    def __init__(self, message: str) -> None:
        super().__init__(message)


class NotFound(ServiceError):
    """404 that reveals nothing about whether the object exists in another organisation."""

    status = 404

    def __init__(self, kind: str, object_id: str) -> None:
        super().__init__(f"{kind} {object_id} not found")


class Conflict(ServiceError):
    """409: the request contradicts what is stored (an Idempotency-Key reused for another body)."""

    status = 409

    def __init__(self, message: str) -> None:
        super().__init__(message)


class PayloadTooLarge(ServiceError):
    """413: what the request would store passes a quota; the detail names the quota, the usage and the limit."""

    status = 413

    def __init__(self, message: str) -> None:
        super().__init__(message)


class TooManyRequests(ServiceError):
    """429: over a quota; Retry-After says how long before asking again is worth it."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, retry_after)


class ServiceUnavailable(ServiceError):
    """503: something the request needs (broker, result backend, inference capacity) is away or full for now."""

    status = 503

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, retry_after)


class BackendFailed(ServiceUnavailable):
    """503 for a decoding backend (pytorch, ctranslate2) that broke on a request it had accepted: not the caller's
    fault, so a retry (or the other backend) may serve it. The worker's own answer has the same words."""

    def __init__(self, backend: str, model_id: str, reason: str) -> None:
        super().__init__(f"inference backend {backend!r} failed on model {model_id}: {reason}", BACKEND_RETRY_SECONDS)
        self.backend, self.model_id = backend, model_id


class WorkerFailed(ServiceError):
    """502: a task that is not a decoding one raised on the worker; the detail names the exception's type only."""

    status = 502

    def __init__(self, message: str) -> None:
        super().__init__(message)


class WorkerTimeout(ServiceError):
    """504: no worker answered in time. The task may still run: a caller may answer 202 instead."""

    status = 504

    def __init__(self, message: str) -> None:
        super().__init__(message)


class WorkerRefused(ServiceError):
    """The worker's own refusal (worker/serving/errors.py RequestError), answered with the status and words it
    chose; a 503 from it gets Retry-After like any backend failure."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message, BACKEND_RETRY_SECONDS if status == 503 else None)
        self.status = status
