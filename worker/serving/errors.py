"""Why an inference worker refuses a request, with the HTTP status the API answers it with."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class RequestError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


class ModelUnavailable(RequestError):
    """The model row is gone (404) or its files are missing or fail verification (503)."""


def backend_failed(backend: str, model_id: str, exc: Exception) -> RequestError:
    """A decoding backend broke (not the request): 503 naming it, so clients retry or pick the other backend."""
    log.error("model %s: backend %r failed: %s: %s", model_id, backend, type(exc).__name__, exc, exc_info=exc)
    return RequestError(503, f"inference backend {backend!r} failed on model {model_id}: {type(exc).__name__}: {exc}")


def decoding(backend: str, model_id: str, call: Callable[[], T]) -> T:
    """call() decodes a request already checked: whatever it raises (a ValueError too) is the backend's failure,
    a 503 naming it. A RequestError (the model unavailable, the backend failing to load) is raised as it is."""
    try:
        return call()
    except RequestError:
        raise
    except Exception as exc:
        raise backend_failed(backend, model_id, exc) from exc
