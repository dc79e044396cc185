"""A private redis-server for tests that stop and restart the broker (the shared one must stay up)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

from bench.harness.stack import free_port


class RedisServer:
    def __init__(self, folder: Path) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed")
        self.folder, self.port = folder, free_port()
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart on the same port) an empty server that keeps nothing on disk, like a crashed one."""
        log = open(self.folder / f"redis-{self.port}.log", "ab")
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if redis.Redis.from_url(self.url, socket_timeout=1).ping():
                    return
            except redis.RedisError:
                time.sleep(0.1)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # an abrupt crash: queued messages are gone with it
            self.process.wait()
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=2)
