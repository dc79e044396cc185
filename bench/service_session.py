"""The service on its embedded default (`python -m app.cli serve`: SQLite, local broker, a training and an inference
worker) for a benchmark: started in a temporary folder, an HTTP client with its local key, uploads, and the
translations of a test set by beam search over HTTP."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import torch

from bench.harness.stack import Processes, free_port, service_env, wait_for


@contextmanager
def embedded_service(prefix: str, **env: str) -> Iterator[httpx.Client]:
    """A client of a fresh embedded service whose training worker uses this process's torch threads."""
    with embedded_stack(prefix, **env) as (client, _):
        yield client


@contextmanager
def embedded_stack(prefix: str, **env: str) -> Iterator[tuple[httpx.Client, int]]:
    """embedded_service's client, and the pid of its `serve` process (whose children are its API and workers)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    port = free_port()
    full_env = {
        **service_env(
            DATA_DIR=str(tmp / "var"),
            PORT=str(port),
            OMP_NUM_THREADS=str(torch.get_num_threads()),
            MAX_TEXTS_PER_REQUEST="64",
            RATE_LIMIT_PER_MINUTE="1000000",
            MAX_UPLOAD_MB="200",
            **env,
        ),
        "TORCH_THREADS": str(torch.get_num_threads()),
    }
    processes = Processes(tmp)
    serve = processes.start("serve", [sys.executable, "-m", "app.cli", "serve"], full_env)
    url = f"http://127.0.0.1:{port}"
    try:
        key_file = tmp / "var" / "local-api-key"

        def up() -> bool:
            try:
                return key_file.exists() and httpx.get(f"{url}/healthz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 120, "the service")
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key_file.read_text().strip()}"}, timeout=600
        ) as client:
            yield client, serve.pid
    finally:
        processes.stop()


def upload(client: httpx.Client, path: Path, name: str) -> str:
    with open(path, "rb") as f:
        r = client.post("/v1/datasets", data={"name": name, "kind": "parallel"}, files={"file": (path.name, f)})
    r.raise_for_status()
    return str(r.json()["id"])


def translate_all(client: httpx.Client, model: str, sources: Sequence[str], beam_size: int = 4) -> list[str]:
    """`model` (an id or name@alias) translates every source, 64 to a request."""
    return [t["text"] for t in translations(client, model, sources, beam_size)]


def translations(client: httpx.Client, model: str, sources: Sequence[str], beam_size: int = 4) -> list[dict[str, Any]]:
    """The API's translation objects (text, score, confidence, low_confidence) of every source, 64 to a request."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(sources), 64):
        r = client.post(
            f"/v1/models/{model}/translate", json={"texts": list(sources[start : start + 64]), "beam_size": beam_size}
        )
        r.raise_for_status()
        found += r.json()["translations"]
    return found
