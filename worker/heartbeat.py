"""A thread in the worker's main process that records it in the `workers` table every few seconds: its queues,
its device, and, for an inference worker, what it serves (worker/warm.py, read from this process's caches)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from celery import Celery
from sqlalchemy import select

from app.core.settings import get_settings
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import Worker
from worker import reaper
from worker.device import DeviceInfo, device_info, worker_device

log = logging.getLogger(__name__)
_stop = threading.Event()
Serving = Callable[[], dict[str, Any] | None]  # what an inference worker serves now; None: unchanged


def beat(
    hostname: str,
    queues: list[str],
    starting: bool = False,
    info: DeviceInfo | None = None,
    serving: dict[str, Any] | None = None,
) -> None:
    with session_scope() as session:
        row = session.scalar(select(Worker).where(Worker.hostname == hostname))
        if row is None:
            row = Worker(hostname=hostname, queues=",".join(queues), pid=os.getpid())
            session.add(row)
        else:
            row.queues, row.pid, row.last_seen_at = ",".join(queues), os.getpid(), utcnow()
            if starting:  # a worker restarted under the same name is no longer draining
                row.draining, row.started_at = False, utcnow()
        if info is not None:
            row.device_kind, row.device_name = info.kind, info.name[:200]
            row.device_memory_total, row.device_memory_free = info.memory_total, info.memory_free
        if serving is not None:
            row.serving = serving


def _loop(celery: Celery, hostname: str, queues: list[str], every: float, serving: Serving | None) -> None:
    starting = True
    while True:
        try:
            beat(hostname, queues, starting, device_info(worker_device()), serving() if serving else None)
            starting = False
            reaper.sweep(celery)
        except Exception:  # the database or the broker may be briefly away; keep beating
            log.exception("heartbeat of %s failed", hostname)
        if _stop.wait(every):
            return


def start(celery: Celery, hostname: str, queues: list[str], serving: Serving | None = None) -> None:
    _stop.clear()
    every = get_settings().worker_heartbeat_seconds
    args = (celery, hostname, queues, every, serving)
    threading.Thread(target=_loop, args=args, name="heartbeat", daemon=True).start()
    log.info("worker %s consuming %s", hostname, ",".join(queues))


def stop() -> None:
    _stop.set()
