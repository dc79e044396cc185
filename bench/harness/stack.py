"""Run the service as real processes (uvicorn, Celery workers) for end-to-end tests."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_env(**overrides: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "ARTIFACT_ROOT", "DATA_DIR", "PORT", "HOST")
    }
    # One torch thread per worker: the test processes share two cores, where more threads run slower.
    env.update(PYTHONUNBUFFERED="1", TORCH_THREADS="1", **overrides)
    return env


def run_cli(env: dict[str, str], *args: str) -> str:
    """Run `python -m app.cli ARGS` and return its stdout (raises with stderr on failure)."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"app.cli {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def create_key(env: dict[str, str], name: str) -> str:
    return run_cli(env, "create-key", name).strip().splitlines()[-1]


class Processes:
    """Child processes with their output in log files; stopped (and logs shown) at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: dict[str, subprocess.Popen] = {}

    def start(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "wb")
        child = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.children[name] = child
        return child

    def start_api(self, env: dict[str, str], port: int) -> str:
        self.start(
            "api",
            [
                sys.executable,
                "-m",
                "uvicorn",
                "app.main:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            env,
        )
        return f"http://127.0.0.1:{port}"

    def start_worker(
        self,
        env: dict[str, str],
        queues: str,
        name: str,
        pool: str = "prefork",
        concurrency: int = 1,
        memory_limit_mb: int | None = None,
    ) -> subprocess.Popen:
        """A Celery worker; memory_limit_mb: its processes' heap capped (prlimit --data), as a container's memory
        is, so that one that tries to hold more gets MemoryError instead of taking the test host's memory."""
        cap = ["prlimit", f"--data={memory_limit_mb * 1024 * 1024}", "--"] if memory_limit_mb else []
        return self.start(
            name,
            [
                *cap,
                sys.executable,
                "-m",
                "celery",
                "-A",
                "worker.celery_app",
                "worker",
                "-Q",
                queues,
                "-P",
                pool,
                "-c",
                str(concurrency),
                "-n",
                f"{name}@%h",
                "--loglevel",
                "INFO",
            ],
            env,
        )

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        for child in self.children.values():
            if child.poll() is None:
                os.killpg(child.pid, sig)
        for child in self.children.values():
            try:
                child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


# How long a started service or worker may take to answer /healthz: a hang guard, not a speed check. On a loaded
# 2-core host (four test workers, each starting processes that import torch) a start took more than 60 s.
START_TIMEOUT_S = 300.0


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def healthy_with_workers(url: str, n_workers: int):
    def check():
        try:
            r = httpx.get(f"{url}/healthz", timeout=5)
        except httpx.HTTPError:
            return None
        body = r.json() if r.status_code in (200, 503) else None
        return body if body and r.status_code == 200 and len(body["workers"]) >= n_workers else None

    return check


def batch_sizes(client: httpx.Client, metrics_token: str) -> tuple[float, float]:
    """(sum, count) of the inference_batch_size histogram of the service's /metrics."""
    text = client.get("/metrics", headers={"Authorization": f"Bearer {metrics_token}"}).text
    found = dict(re.findall(r"^inference_batch_size_(sum|count) ([0-9.e+]+)$", text, re.M))
    return float(found.get("sum", 0)), float(found.get("count", 0))
