"""Job logs: what the training task logs about its job, kept with the job (GET /v1/jobs/{id}/logs).

A `JobLogHandler` on the worker's root logger keeps the records of the product's own loggers (app, worker, model;
not the trainer's, which name local paths) at INFO and above that are bound to a job: the `job_id` that
app/core/logs.bind_task binds for the training task (or an explicit `extra={"job_id": ...}`). Each is redacted as the
log formatter redacts it (app.core.security.redact_keys), traceback included, and clipped to MAX_CHARS.

Lines wait in memory and are written in batches: when the lease keeper writes progress and metrics (every couple
of seconds, and at each evaluation and checkpoint) and when the task ends, never at log time, so a training step
never waits on SQL. At most MAX_LINES wait per job (the oldest go first, counted as dropped); the table keeps a
job's newest lines (app/db/log_rows.py). A database error while writing is swallowed after one warning on stderr:
logs never break training.

Python warnings (`warnings.warn`: torch's UserWarnings, a library's DeprecationWarning) raised while a job is bound
are logged to the `worker.warnings` logger at WARNING, so they reach the job's log too. The hook is installed once
per process and reads the job from the context (a thread's or task's own), never swapped per task, so concurrent
tasks in one worker each keep their own warnings; outside a job a warning is shown as Python would show it. A
warning that Python shows once per place it is raised (its "default" action) is shown again once a new job begins,
so each job's log has it.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy.exc import IntegrityError

from app.core import logs
from app.core.security import redact_keys
from app.db import log_rows
from app.db.log_rows import MAX_CHARS, MAX_LINES, LogLine
from app.db.session import session_scope

PRODUCT_LOGGERS = ("app", "worker", "model")
# The trainer's lines name the worker's own paths (its resume line); the task says the same in the job's terms.
NOT_KEPT = ("model.train.trainer",)
WARNINGS_LOGGER = "worker.warnings"
_ROOT = Path(__file__).resolve().parents[2]  # the project folder: worker/training/ is two below it


def level_name(levelno: int) -> str:
    """One of log_rows.LEVELS for a record's level (custom levels fall to the one below them)."""
    for name, threshold in (("critical", logging.CRITICAL), ("error", logging.ERROR), ("warning", logging.WARNING)):
        if levelno >= threshold:
            return name
    return "info"


@dataclass
class _Pending:
    lines: list[LogLine] = field(default_factory=list)
    skipped: int = 0  # lines dropped before they were written


class JobLogHandler(logging.Handler):
    lock: threading.RLock  # logging.Handler.__init__ creates it; emit() runs under it

    def __init__(self, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> None:
        super().__init__(logging.INFO)
        self.max_lines, self.max_chars = max_lines, max_chars
        self.text = logging.Formatter("%(message)s")  # the message, then its traceback and stack, if any
        self._pending: dict[str, _Pending] = {}
        self._attempts: dict[str, int] = {}
        self._failing: set[str] = set()  # jobs whose last write failed: warned once until one succeeds
        self._writing = threading.local()  # a line logged while writing lines (by this thread) is not kept

    # -- at log time: memory only -----------------------------------------------------------------------------
    def emit(self, record: logging.LogRecord) -> None:  # called under self.lock (logging.Handler.handle)
        if getattr(self._writing, "active", False) or record.name.split(".")[0] not in PRODUCT_LOGGERS:
            return
        if record.name in NOT_KEPT:
            return
        job_id = getattr(record, "job_id", None) or logs.bound().get("job_id")
        if not job_id:
            return
        try:
            message = log_rows.clip(redact_keys(self.text.format(record)), self.max_chars)
        except Exception:
            self.handleError(record)
            return
        line = LogLine(
            level=level_name(record.levelno),
            logger=record.name,
            message=message,
            attempt=self._attempts.get(job_id),
            created_at=datetime.fromtimestamp(record.created, UTC),
        )
        self._keep(job_id, [line], 0)

    def _keep(self, job_id: str, lines: list[LogLine], skipped: int) -> None:
        """Queue lines after those already waiting for the job; beyond max_lines the oldest go (counted)."""
        pending = self._pending.setdefault(job_id, _Pending())
        pending.lines.extend(lines)
        pending.skipped += skipped
        excess = len(pending.lines) - self.max_lines
        if excess > 0:
            del pending.lines[:excess]
            pending.skipped += excess

    # -- from the task and the lease keeper ---------------------------------------------------------------------
    def begin(self, job_id: str, attempt: int) -> None:
        """The job's lines from now on belong to `attempt`."""
        with self.lock:
            self._attempts[job_id] = attempt

    def write(self, job_id: str, final: bool = False) -> None:
        """Write the job's waiting lines in one transaction; on a database error warn on stderr and keep them for
        the next write (final: drop them; the task is over and nothing else would write them)."""
        with self.lock:
            pending = self._pending.pop(job_id, None)
            if final:
                self._attempts.pop(job_id, None)
        if pending is None or not (pending.lines or pending.skipped):
            return
        self._writing.active = True
        try:
            try:
                self._append(job_id, pending)
            except IntegrityError:  # another writer took the same seqs meanwhile: after its lines, then
                self._append(job_id, pending)
        except Exception as exc:
            self._warn(job_id, len(pending.lines), exc, final)
            if not final:
                with self.lock:
                    self._requeue(job_id, pending)
        else:
            self._failing.discard(job_id)
        finally:
            self._writing.active = False

    def _append(self, job_id: str, pending: _Pending) -> None:
        with session_scope() as session:
            log_rows.append(session, job_id, pending.lines, pending.skipped, self.max_lines)

    def discard(self, job_id: str) -> None:
        """Forget the job's waiting lines and attempt."""
        with self.lock:
            self._pending.pop(job_id, None)
            self._attempts.pop(job_id, None)

    def _requeue(self, job_id: str, failed: _Pending) -> None:
        """The lines of a failed write go back before those logged meanwhile."""
        newer = self._pending.pop(job_id, _Pending())
        self._pending[job_id] = _Pending(list(failed.lines), failed.skipped)
        self._keep(job_id, newer.lines, newer.skipped)

    def _warn(self, job_id: str, count: int, exc: Exception, final: bool) -> None:
        if job_id in self._failing and not final:
            return
        self._failing.add(job_id)
        fate = "dropped" if final else "kept for the next try"
        reason = redact_keys(f"{type(exc).__name__}: {exc}".splitlines()[0])
        sys.stderr.write(f"job log: {count} lines of job {job_id} not written ({fate}): {reason}\n")


def warning_place(filename: str) -> str:
    """Where a warning was raised, without the worker's own paths: a package's path inside site-packages, the
    project's path inside its folder, else the file's name."""
    path = Path(filename)
    for anchor in ("site-packages", "dist-packages"):
        if anchor in path.parts:
            return "/".join(path.parts[path.parts.index(anchor) + 1 :])
    try:
        return path.resolve().relative_to(_ROOT).as_posix()
    except (ValueError, OSError):
        return path.name


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """warnings.showwarning: a warning raised while a job is bound is a WARNING line of the job; others (and
    one written to a file of the caller's choosing) are shown as before."""
    job_id = logs.bound().get("job_id")
    if job_id is None or file is not None:
        _shown_before(message, category, filename, lineno, file, line)
        return
    text = str(message).strip()
    logging.getLogger(WARNINGS_LOGGER).warning(
        "%s: %s (%s:%d)", category.__name__, text, warning_place(filename), lineno
    )


_shown_before: Any = warnings.showwarning


def capture_warnings() -> None:
    """Send the warnings raised while a job is bound to its log (idempotent; the hook replaced is kept for the
    warnings raised outside a job)."""
    global _shown_before
    if warnings.showwarning is not _show_warning:
        _shown_before = warnings.showwarning
        warnings.showwarning = _show_warning


def warn_again() -> None:
    """Forget which warnings were shown already, so a new job sees each once in its own log. Python keeps that
    per module and clears it whenever its filters change."""
    mutated = getattr(warnings, "_filters_mutated", None)
    if callable(mutated):
        mutated()


_installed: JobLogHandler | None = None


def install(handler: JobLogHandler | None = None) -> JobLogHandler:
    """Put a JobLogHandler on the root logger (replacing one installed before). The product's loggers log at INFO
    at least, for the job logs, while the service's own output stays at LOG_LEVEL."""
    global _installed
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, JobLogHandler)]:
        root.removeHandler(old)
    if root.level > logging.INFO:
        for service in [h for h in root.handlers if isinstance(h, logs.ServiceHandler)]:
            service.setLevel(max(service.level, root.level))
        for name in PRODUCT_LOGGERS:
            if logging.getLogger(name).getEffectiveLevel() > logging.INFO:
                logging.getLogger(name).setLevel(logging.INFO)
    _installed = handler or JobLogHandler()
    root.addHandler(_installed)
    capture_warnings()
    return _installed


def begin(job_id: str, attempt: int) -> None:
    warn_again()
    if _installed is not None:
        _installed.begin(job_id, attempt)


def write(job_id: str, final: bool = False) -> None:
    if _installed is not None:
        _installed.write(job_id, final)


def discard(job_id: str) -> None:
    if _installed is not None:
        _installed.discard(job_id)
