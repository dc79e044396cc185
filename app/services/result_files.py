"""Inference answers on the embedded default: a file each in a folder, as Celery's filesystem result backend keeps
them, written atomically.

The embedded default used Celery's database backend on an SQLite file: storing an answer took the worker 3.4 ms and
each look for it 1.4 ms of the API's CPU, so the API looked only every 5 ms; a one-sentence translation spent about
10 ms between the worker's answer and the API's reading it. A file is written in tens of microseconds, and the
API process waiting for it is told at once (app/services/answer_wake.py). Celery's own backend writes the file in
place, where a reader could find half of it: here it is written under a temporary name and renamed (a rename
within a folder is atomic).
The API removes each answer once it has read it (app/services/inference_client.py); an answer nobody read (its
request timed out) is removed by the workers' sweep after `result_expires` (worker/reaper.py).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from celery.backends.filesystem import FilesystemBackend
from kombu.utils.encoding import ensure_bytes

from app.services import answer_wake

BACKEND = f"{__name__}:ResultFiles"  # for a file:// result backend URL (app/services/queueing.py)

_Base: Any = FilesystemBackend  # celery ships no types


class ResultFiles(_Base):  # type: ignore[misc]
    def __init__(self, url: str | None = None, *args: Any, **kwargs: Any) -> None:
        if url and url.startswith("file://"):
            Path(url.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
        super().__init__(url, *args, **kwargs)

    def set(self, key: bytes | str, value: Any) -> None:
        path = self._filename(key)
        partial = path + f".{os.getpid()}-{threading.get_ident()}.partial".encode()
        with self.open(partial, "wb") as out:
            out.write(ensure_bytes(value))
        os.replace(partial, path)
        name, prefix = (k.decode() if isinstance(k, bytes) else k for k in (key, self.task_keyprefix))
        if name.startswith(prefix):  # a task's answer: wake the API process waiting for it
            answer_wake.answer_written(self.url, name.removeprefix(prefix))


def celery_url(result_backend: str) -> str:
    """RESULT_BACKEND as Celery takes it: a file:// URL names this backend."""
    return f"{BACKEND}+{result_backend}" if result_backend.startswith("file://") else result_backend
