"""Sending an inference task and waiting for its answer (the API side of the inference queue)."""

from __future__ import annotations

import logging
import time
from functools import lru_cache
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from celery.states import READY_STATES

from app.core.observability import observe_batch_size, observe_inference
from app.core.settings import Settings
from app.core.task_names import INFERENCE_QUEUE, REQUEST_TASKS
from app.services import answer_wake
from app.services.coalesce import Coalescer
from app.services.errors import (
    BackendFailed,
    ServiceError,
    ServiceUnavailable,
    WorkerFailed,
    WorkerRefused,
    WorkerTimeout,
)
from app.services.queueing import get_sender, queue_depth

log = logging.getLogger(__name__)
BROKER_RETRY_SECONDS = 5  # the broker or result backend is away: a restart or failover takes seconds
# Texts a group of translate requests sends as one task when INFERENCE_MAX_BATCH is unset (the API does not know the
# workers' devices; a GPU worker's micro-batcher puts several such tasks in one batch).
COALESCE_MAX_TEXTS = 64
QUEUE_FULL_RETRY_SECONDS = 2  # the inference queue is full: the workers drain it in about this long


@lru_cache
def _coalescer(max_texts: int, wait_seconds: float) -> Coalescer:
    return Coalescer(max_texts, wait_seconds)


def coalescer(settings: Settings) -> Coalescer:
    """This process's grouping of translate requests (see app/services/coalesce.py); a request waits for its group at
    most about twice the inference timeout before it goes alone."""
    return _coalescer(settings.inference_max_batch or COALESCE_MAX_TEXTS, 2 * settings.inference_timeout_seconds + 1)


def _task_failed(task: str, args: list[Any], kwargs: dict[str, Any], exc: BaseException) -> ServiceError:
    """A task that raised on the worker, reported without the worker's internals: for a decoding task (its first
    argument the model id) its backend failed, BackendFailed (503) naming it; for another task, WorkerFailed (502)."""
    if task not in REQUEST_TASKS:  # each decodes with `backend` (else pytorch) on the model its first argument names
        log.error("task %s failed on the inference worker: %s: %s", task, type(exc).__name__, exc, exc_info=exc)
        return WorkerFailed(f"the inference worker failed: {type(exc).__name__}")
    backend = kwargs.get("backend", "pytorch")
    log.error(
        "task %s: inference backend %r failed on model %s: %s: %s",
        task,
        backend,
        args[0],
        type(exc).__name__,
        exc,
        exc_info=exc,
    )
    return BackendFailed(backend, args[0], type(exc).__name__)


POLL_FIRST_SECONDS = 0.0005  # a request waiting for its answer in a database row looks after this pause ...
POLL_GROWTH = 1.5  # ... each next one this much longer ...
POLL_LONGEST_SECONDS = 0.005  # ... up to this


def wait_for_answer(result: Any, settings: Settings, timeout: float) -> Any:
    """The task's answer, or the exception it raised (propagate=False). Redis tells the API when an answer arrives,
    and so does the worker that writes it to a file (app/services/answer_wake.py); a database row is looked for at
    growing intervals."""
    url = settings.celery_result_backend
    if url.startswith(("redis://", "rediss://")):
        return result.get(timeout=timeout, interval=POLL_LONGEST_SECONDS, propagate=False)
    waits = answer_wake.answer_waits(url) if url.startswith("file://") else None
    woken = waits.expect(result.id) if waits is not None else None
    deadline, pause = time.monotonic() + timeout, POLL_FIRST_SECONDS
    try:
        while True:
            if woken is not None:
                woken.clear()  # before the look: a wake-up that comes after it is kept for the wait below
            if result.backend.get_task_meta(result.id)["status"] in READY_STATES:
                break
            if time.monotonic() + pause > deadline:
                raise CeleryTimeout(f"no answer to task {result.id} within {timeout:g}s")
            if woken is not None:
                woken.wait(min(answer_wake.SAFETY_LOOK_SECONDS, max(0.0, deadline - time.monotonic())))
            else:
                time.sleep(pause)
                pause = min(pause * POLL_GROWTH, POLL_LONGEST_SECONDS)
    finally:
        if waits is not None:
            waits.done(result.id)
    return result.get(timeout=timeout, propagate=False)  # ready: read now


def forget(result: Any) -> None:
    """Remove an answer once read, rather than leave it to expire: the embedded default's result folder holds only
    the answers on their way. Best effort: an answer left behind expires (worker/reaper.py)."""
    try:
        result.forget()
    except Exception:  # noqa: BLE001  # the answer is read; its removal must not fail the request
        log.warning("could not remove an inference answer from the result backend", exc_info=True)


def call(
    settings: Settings,
    task: str,
    args: list[Any],
    kwargs: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> tuple[dict[str, Any], float]:
    """Run `task` on an inference worker; returns (answer, elapsed ms) or raises the ServiceError to answer with:
    ServiceUnavailable (broker or result backend away, queue full, backend failed), WorkerTimeout, WorkerFailed or
    the worker's own WorkerRefused. timeout: seconds to wait (default INFERENCE_TIMEOUT_SECONDS)."""
    started = time.perf_counter()
    try:
        depth = queue_depth()
    except Exception as exc:
        raise ServiceUnavailable(f"broker unavailable: {type(exc).__name__}", BROKER_RETRY_SECONDS) from exc
    if depth >= settings.inference_queue_limit:
        raise ServiceUnavailable(
            f"{depth} inference requests are waiting (INFERENCE_QUEUE_LIMIT="
            f"{settings.inference_queue_limit}); try again shortly",
            QUEUE_FULL_RETRY_SECONDS,
        )
    timeout = timeout or settings.inference_timeout_seconds
    try:
        result = get_sender().send_task(task, args=args, kwargs=kwargs or {}, queue=INFERENCE_QUEUE, expires=timeout)
    except Exception as exc:
        raise ServiceUnavailable(f"broker unavailable: {type(exc).__name__}", BROKER_RETRY_SECONDS) from exc
    try:  # propagate=False: the exception a task raised is returned, told apart from one raised here
        answer = wait_for_answer(result, settings, timeout)
    except CeleryTimeout as exc:
        raise WorkerTimeout(f"no inference worker answered within {timeout:g}s") from exc
    except Exception as exc:  # the answer could not be read (the result backend is away)
        raise ServiceUnavailable(f"result backend unavailable: {type(exc).__name__}", BROKER_RETRY_SECONDS) from exc
    forget(result)
    if isinstance(answer, BaseException):  # the task raised instead of answering
        raise _task_failed(task, args, kwargs or {}, answer)
    if "error" in answer:
        raise WorkerRefused(answer["error"]["status"], answer["error"]["detail"])
    if "batch_size" in answer:  # translations: the micro-batch this request was decoded in, for /metrics only
        observe_batch_size(answer.pop("batch_size"))
    elapsed = (time.perf_counter() - started) * 1000
    observe_inference(task.rsplit(".", 1)[-1], elapsed, float(answer.get("compute_ms", 0.0)))
    return answer, elapsed
