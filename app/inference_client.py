"""Sending an inference task and waiting for its answer (the API side of the inference queue)."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from fastapi import HTTPException, status

from app.coalesce import Coalescer
from app.observability import observe_batch_size
from app.queueing import get_sender, queue_depth
from app.settings import Settings
from app.task_names import INFERENCE_QUEUE


@lru_cache
def _coalescer(max_texts: int, wait_seconds: float) -> Coalescer:
    return Coalescer(max_texts, wait_seconds)


def coalescer(settings: Settings) -> Coalescer:
    """This process's grouping of translate requests (see app/coalesce.py); a request waits for its group at
    most about twice the inference timeout before it goes alone."""
    return _coalescer(settings.inference_max_batch, 2 * settings.inference_timeout_seconds + 1)


def call(
    settings: Settings,
    task: str,
    args: list[Any],
    kwargs: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> tuple[dict[str, Any], float]:
    """Run `task` on an inference worker; returns (answer, elapsed ms) or raises the HTTP error to send.
    timeout: seconds to wait (default INFERENCE_TIMEOUT_SECONDS)."""
    started = time.perf_counter()
    try:
        depth = queue_depth()
    except Exception as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"broker unavailable: {type(exc).__name__}",
            headers={"Retry-After": "5"},
        ) from exc
    if depth >= settings.inference_queue_limit:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"{depth} inference requests are waiting (INFERENCE_QUEUE_LIMIT="
            f"{settings.inference_queue_limit}); try again shortly",
            headers={"Retry-After": "2"},
        )
    timeout = timeout or settings.inference_timeout_seconds
    try:
        result = get_sender().send_task(task, args=args, kwargs=kwargs or {}, queue=INFERENCE_QUEUE, expires=timeout)
    except Exception as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"broker unavailable: {type(exc).__name__}",
            headers={"Retry-After": "5"},
        ) from exc
    try:
        answer = result.get(timeout=timeout, interval=0.005, propagate=True)  # results expire on their own
    except CeleryTimeout as exc:
        raise HTTPException(
            status.HTTP_504_GATEWAY_TIMEOUT,
            f"no inference worker answered within {timeout:g}s",
        ) from exc
    except Exception as exc:  # the task raised: a bug on the worker, reported without its internals
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, f"the inference worker failed: {type(exc).__name__}") from exc
    if "error" in answer:
        code = answer["error"]["status"]
        retry = {"Retry-After": "10"} if code == status.HTTP_503_SERVICE_UNAVAILABLE else None
        raise HTTPException(code, answer["error"]["detail"], headers=retry)
    if "batch_size" in answer:  # translations: the micro-batch this request was decoded in, for /metrics only
        observe_batch_size(answer.pop("batch_size"))
    return answer, (time.perf_counter() - started) * 1000
