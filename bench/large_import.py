"""A model archive of OPUS-MT's size imported with the default settings: a MarianMTModel folder as large as
Helsinki-NLP/opus-mt-en-de (74M parameters, 298 MB of safetensors, 58,101 vocabulary entries), built here with
random weights (nothing is downloaded), packed as .tar.gz and sent to POST /v1/models/import; the API's peak memory
(VmHWM) measured.

    python bench/large_import.py

The service runs on its embedded default, the API under uvicorn and one inference worker. The last line is one
JSON object; `ratio` is the API's memory budget over its peak (300 MB / peak RSS: above 1 is within budget).
"""

from __future__ import annotations

import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.marian import OPUS_MT_EN_DE, build_marian_folder  # noqa: E402
from bench.harness.stack import (  # noqa: E402
    START_TIMEOUT_S,
    Processes,
    create_key,
    free_port,
    healthy_with_workers,
    run_cli,
    service_env,
    wait_for,
)
from bench.large_upload import API_BUDGET_MB, peak_rss_mb  # noqa: E402


def main() -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="large-import-"))
    folder = build_marian_folder(tmp, **OPUS_MT_EN_DE)
    archive = tmp / "opus-mt-en-de.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(folder, arcname=folder.name)
    size = archive.stat().st_size
    print(f"archive of {size / 1e6:.0f} MB", file=sys.stderr)
    env = service_env(DATA_DIR=str(tmp / "var"), EXPORT_TIMEOUT_SECONDS="600")
    run_cli(env, "migrate")
    processes = Processes(tmp)
    url = processes.start_api(env, free_port())
    worker = processes.start_worker(env, "inference", "importer", pool="threads", concurrency=2)
    try:
        wait_for(healthy_with_workers(url, 1), timeout=START_TIMEOUT_S, what="the service")
        api_pid = processes.children["api"].pid
        key = create_key(env, "bench")
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=900)
        t0 = time.perf_counter()
        with open(archive, "rb") as f:
            response = client.post("/v1/models/import", files={"file": (archive.name, f)})
        seconds = time.perf_counter() - t0
        body = response.json()
        result = {
            "bench": "large_import",
            "archive_mb": round(size / 1e6, 1),
            "status_code": response.status_code,
            "detail": body.get("detail"),
            "parameters": body.get("parameters"),
            "seconds": round(seconds, 1),
            "api_peak_rss_mb": round(peak_rss_mb(api_pid), 1),
            "worker_peak_rss_mb": round(peak_rss_mb(worker.pid), 1),
            "api_budget_mb": API_BUDGET_MB,
            "ratio": round(API_BUDGET_MB / peak_rss_mb(api_pid), 3),
        }
    finally:
        processes.stop()
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
