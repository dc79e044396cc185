"""A real S3-compatible server for tests: moto in server mode, a child process on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.harness.stack import ROOT, free_port, wait_for

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


class S3Server:
    """A moto S3 server; `env` holds the standard variables that point a process at it; its access log (one line
    per request) is in log_path."""

    def __init__(self, process: subprocess.Popen, endpoint_url: str, log_path: Path) -> None:
        self.process, self.endpoint_url, self.log_path = process, endpoint_url, log_path

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint_url, **CREDENTIALS}

    @property
    def store_options(self) -> dict[str, str]:
        """Keyword arguments of app.artifacts.s3.S3Store for this server."""
        return {
            "endpoint_url": self.endpoint_url,
            "access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "region": CREDENTIALS["AWS_DEFAULT_REGION"],
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def bucket_name(self) -> str:
        """A name no bucket has yet."""
        return f"test-{uuid.uuid4().hex[:16]}"

    def object_names(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start_s3_server(log_path: Path, host: str = "127.0.0.1") -> S3Server:
    """Start `python -m moto.server` on a free port and wait until it answers S3's ListBuckets."""
    port = free_port()
    log = open(log_path, "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = S3Server(process, f"http://{host}:{port}", log_path)

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with {process.returncode}: {log_path.read_text(errors='replace')}")
        try:
            return httpx.get(server.endpoint_url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(answers, timeout=60, what="the moto S3 server")
    except BaseException:
        server.stop()
        raise
    return server
