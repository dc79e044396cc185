"""`make run`: migrate, then run the API and one worker per queue as child processes.

A worker per queue, as in production, so a long training job never blocks inference.
Ctrl-C (or SIGTERM) stops all of them: a warm shutdown first, then a kill after a grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.core.settings import Settings
from app.core.task_names import INFERENCE_QUEUE, TRAINING_QUEUE

GRACE_SECONDS = 15


def local_key(settings: Settings) -> str:
    """A key for the local user, kept (mode 0600) in the data folder and reused while it is valid."""
    from app.db.keys import authenticate, create_key
    from app.db.session import session_scope

    path = settings.data_dir / "local-api-key"
    with session_scope() as session:
        if path.exists() and authenticate(session, path.read_text().strip()) is not None:
            return path.read_text().strip()
        _row, clear = create_key(session, "local", owner_name="local")
    path.touch(mode=0o600)
    path.write_text(clear + "\n")
    return clear


def worker_command(queue: str) -> list[str]:
    """Training: one job at a time in a child process. Inference: threads, so requests can share a batch."""
    pool = ["-P", "prefork", "-c", "1"] if queue == TRAINING_QUEUE else ["-P", "threads", "-c", "16"]
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "worker.celery_app",
        "worker",
        "-Q",
        queue,
        *pool,
        "-n",
        f"{queue}-{os.getpid()}@%h",
        "--loglevel",
        "INFO",
    ]


def api_command(settings: Settings) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "app.main:app",
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--log-level",
        settings.log_level,
    ]


def wait_until_healthy(url: str, children: list[subprocess.Popen[bytes]], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(child.poll() is not None for child in children):
            raise RuntimeError("a service process exited during start-up; see its output above")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url}/healthz did not answer within {timeout:.0f}s")


def stop_all(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def prepare_broker() -> None:
    """Create the SQLite broker's tables and queues once, before several processes race to do it."""
    from app.core.task_names import QUEUES
    from app.services.queueing import get_sender

    with get_sender().connection_for_write() as connection:
        channel = connection.default_channel
        for queue in QUEUES:
            channel.queue_declare(queue=queue, passive=False)


def serve(settings: Settings, with_workers: bool = True) -> None:
    from app.db.migrations import upgrade_to_head

    settings.ensure_dirs()
    upgrade_to_head()
    print(f"database at head: {settings.database_url.split('@')[-1]}")
    if settings.embedded_broker:
        prepare_broker()
    key = local_key(settings)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    commands = [api_command(settings)]
    if with_workers:
        commands += [worker_command(TRAINING_QUEUE), worker_command(INFERENCE_QUEUE)]
    children = [subprocess.Popen(cmd, env=env, cwd=Path.cwd()) for cmd in commands]
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    url = f"http://{settings.host}:{settings.port}"
    try:
        wait_until_healthy(url, children)
        print(f"\nService ready at {url}  (API docs: {url}/docs, health: {url}/healthz)")
        print(f"Local API key (also in {settings.data_dir / 'local-api-key'}):\n{key}\n", flush=True)
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        sys.exit("a service process exited; stopping the others")
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
    finally:
        stop_all(children)
