"""Logs: one JSON object per line (python-json-logger), with the ids of what the line is about.

Every process (the API, each worker) calls `configure(settings)` once: one handler on the root logger, uvicorn's
and Celery's loggers sent through it. What a line is about lives in context variables, bound where it becomes
known and read by a filter on every record:

    request_id  the API's middleware (app/api/request_id.py): the client's X-Request-ID or a new one; Celery
                carries it to the task in a message header (`publish_request_id` / `bind_task_request_id`)
    owner_id    the API key's owner (app/api/deps.current_key), and the job's owner in a training task
    job_id      the route's `{job_id}`, or the training task's job
    model_id    the route's `{model_id}`, or the inference task's model

A field appears on a line only when it is bound. The formatter redacts API keys, credential-like query parameters,
`name=value` and `name: value` pairs named like credentials, and the settings' secret values (the S3 secret key,
the metrics token) from the finished line (`app.core.security.redact_keys`), whatever logged them: a message, an
argument, an extra field or a traceback. LOG_FORMAT=text gives the same fields as `key=value` for reading in a
terminal.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from app.core.security import add_secrets, redact_keys
from app.core.settings import Settings

FIELDS = ("request_id", "owner_id", "job_id", "model_id")
_CONTEXT: dict[str, ContextVar[str | None]] = {name: ContextVar(name, default=None) for name in FIELDS}
# The header a published task carries its request id in (Celery puts custom headers on task.request).
TASK_HEADER = "request_id"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def bind(**ids: str | None) -> None:
    """Bind ids to the current context (a request's task, a worker's task): later lines carry them."""
    for name, value in ids.items():
        _CONTEXT[name].set(None if value is None else str(value))


def bound() -> dict[str, str]:
    """The ids bound in the current context."""
    return {name: value for name, var in _CONTEXT.items() if (value := var.get()) is not None}


@contextmanager
def bound_to(**ids: str | None) -> Iterator[None]:
    """Bind ids for a block (a task run), restoring what was bound before it."""
    tokens = {name: _CONTEXT[name].set(None if value is None else str(value)) for name, value in ids.items()}
    try:
        yield
    finally:
        for name, token in tokens.items():
            _CONTEXT[name].reset(token)


class ContextIds(logging.Filter):
    """Puts the bound ids on each record as attributes (the JSON formatter writes them as fields)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in bound().items():
            if not hasattr(record, name):  # an explicit `extra=` wins
                setattr(record, name, value)
        return True


class RedactingJsonFormatter(JsonFormatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact_keys(super().format(record))


class RedactingTextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = " ".join(f"{name}={getattr(record, name)}" for name in FIELDS if hasattr(record, name))
        return redact_keys(f"{line} [{ids}]" if ids else line)


def formatter(kind: str) -> logging.Formatter:
    if kind == "text":
        return RedactingTextFormatter(TEXT_FORMAT)
    return RedactingJsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger", "process": "pid"},
        json_ensure_ascii=False,
    )


class QuietTaskLines(logging.Filter):
    """Drops the INFO lines Celery writes for each task of `names` received and succeeded (its `data` names the
    task). An inference worker answers many short requests a second: those two lines cost it more CPU than taking
    the message (1.3 ms a request of 2-core time, formatted and redacted), and the second carried the task's return
    value, the user's translations, into the log. Their failures are still logged, and the API logs each request."""

    def __init__(self, names: frozenset[str]) -> None:
        super().__init__()
        self.names = names

    def filter(self, record: logging.LogRecord) -> bool:
        data = getattr(record, "data", None)
        return not (record.levelno <= logging.INFO and isinstance(data, dict) and data.get("name") in self.names)


# Celery's loggers of a task received (celery.worker.strategy) and succeeded (celery.app.trace).
TASK_LINE_LOGGERS = ("celery.worker.strategy", "celery.app.trace")


def quiet_task_lines(names: frozenset[str]) -> None:
    """Install QuietTaskLines(names) on Celery's task-line loggers (once: a second call replaces it)."""
    for name in TASK_LINE_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, QuietTaskLines)]:
            logger.removeFilter(old)
        logger.addFilter(QuietTaskLines(names))


class ServiceHandler(logging.StreamHandler[Any]):
    """The one root handler `configure` installs (and replaces on a second call)."""


# Loggers that libraries give handlers of their own: sent to the root handler instead, so every line is ours.
LIBRARY_LOGGERS = ("uvicorn", "uvicorn.access", "uvicorn.error", "celery", "celery.task", "celery.redirected")


def configure(settings: Settings, stream: Any = None) -> logging.Handler:
    """One handler on the root logger at LOG_LEVEL in LOG_FORMAT; library loggers propagate to it. Idempotent:
    a second call replaces the handler it installed."""
    add_secrets(settings.aws_secret_access_key.get_secret_value(), settings.metrics_token.get_secret_value())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, ServiceHandler)]:
        root.removeHandler(old)
    handler = ServiceHandler(stream or sys.stderr)
    handler.setFormatter(formatter(settings.log_format))
    handler.addFilter(ContextIds())
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    for name in LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        library.handlers.clear()
        library.propagate = True
    return handler


def publish_request_id(headers: dict[str, Any] | None = None, **_kwargs: Any) -> None:
    """Celery's before_task_publish: the request id bound where a task is sent travels in its headers."""
    request_id = _CONTEXT["request_id"].get()
    if headers is not None and request_id is not None and TASK_HEADER not in headers:
        headers[TASK_HEADER] = request_id


def bind_task(task: Any = None, args: Any = None, kwargs: Any = None, **_signal: Any) -> None:
    """Celery's task_prerun: the task's lines carry the request id it was sent with and the job or model id
    among its arguments (tasks take ids: `job_id`, `model_id`)."""
    ids: dict[str, str | None] = {name: None for name in FIELDS}
    if task is not None:
        ids["request_id"] = task.request.get(TASK_HEADER)
        try:
            arguments = inspect.signature(task.run).bind_partial(*(args or ()), **(kwargs or {})).arguments
        except TypeError:  # arguments that do not fit: the task itself will say so
            arguments = {}
        ids.update({name: arguments[name] for name in ("job_id", "model_id") if isinstance(arguments.get(name), str)})
    bind(**ids)


def unbind_task(**_signal: Any) -> None:
    """Celery's task_postrun: nothing of a finished task stays on the worker's next lines."""
    bind(**{name: None for name in FIELDS})
