"""Uploads built to exhaust a worker, on a real stack (uvicorn, Celery workers, PostgreSQL, Redis): each worker's
memory capped as a container's is, so that one that tries to hold what the upload unpacks to gets MemoryError here
rather than the test host's memory. Each bomb is refused naming the limit; the worker that refused it is the same
process afterwards, with nothing sent again, and handles the next upload as ever."""

from __future__ import annotations

import httpx

from app.core.task_names import PROCESS_DATASET
from bench.harness.stack import START_TIMEOUT_S, healthy_with_workers, wait_for
from tests.reliability.conftest import Stack
from tests.support.bombs import MB, forged_native, zeros_gz
from tests.support.client import write_jsonl

MEMORY_CAP_MB = 2048
CRASHES = ("MemoryError", "WorkerLostError", "exited prematurely", "Traceback")


def _start(stack: Stack, queues: str, name: str, **kwargs) -> int:
    worker = stack.processes.start_worker(stack.env, queues, name, memory_limit_mb=MEMORY_CAP_MB, **kwargs)
    wait_for(healthy_with_workers(stack.url, 1), timeout=START_TIMEOUT_S, what=f"worker {name}")
    return worker.pid


def _alive_and_clean(stack: Stack, name: str, pid: int) -> None:
    assert stack.processes.children[name].poll() is None and stack.processes.children[name].pid == pid
    log = stack.processes.log(name)
    assert not [crash for crash in CRASHES if crash in log], log[-3000:]


def test_a_dataset_that_unpacks_to_gigabytes_fails_naming_the_limit_and_the_worker_parses_the_next(stack, tmp_path):
    """The review's upload: 4 MB of gzip that unpacks to 4 GiB of zeros and no newline. Without a bound the data
    worker holds the line until its memory runs out, the dataset stays processing and its task is sent again."""
    pid = _start(stack, "data", "parser")
    api = stack.api("mallory")
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(zeros_gz(4096))
    assert bomb.stat().st_size < 8 * MB
    failed = api.upload(bomb, "parallel", timeout=120)
    assert (failed["status"], failed["error_line"]) == ("failed", 1), failed
    assert "longer than 1048576 bytes, the longest line allowed (MAX_DATASET_LINE_KB=1024)" in failed["error"]
    ready = api.upload(write_jsonl(tmp_path / "ok.jsonl", [("one", "eins"), ("two", "zwei")]), "parallel")
    assert (ready["status"], ready["rows"]) == ("ready", 2)
    _alive_and_clean(stack, "parser", pid)
    assert stack.processes.log("parser").count(f"Task {PROCESS_DATASET}[") == 2 * 2  # each received, then succeeded


def _native_export(tmp_path) -> tuple[bytes, str]:
    """A small model's native export (as GET /v1/models/{id}/export?format=native gives it) and its folder unpacked."""
    from model.data.demo import reverse_task
    from model.data.tokenizer import Tokenizer
    from model.io.checkpoint import save_checkpoint
    from model.io.export_archive import build_export
    from model.io.import_archive import safe_extract
    from tests.model.io.test_export import TEXTS, random_model

    tokenizer = Tokenizer.train([t for p in reverse_task(300, seed=0) for t in p] + TEXTS, 300)
    checkpoint = save_checkpoint(tmp_path / "ckpt", random_model(tokenizer.vocab_size), tokenizer, "translation")
    archive = build_export(checkpoint, "native", tmp_path / "small-native.tar.gz", "small-native")
    return archive.read_bytes(), str(safe_extract(archive, tmp_path / "unpacked", 50 * MB))


def _import(http: httpx.Client, name: str, data: bytes) -> httpx.Response:
    return http.post("/v1/models/import", files={"file": (name, data)}, timeout=180)


def test_model_archives_that_would_build_gigabytes_are_refused_and_the_worker_imports_the_next(stack, tmp_path):
    """A 1 KB-config archive asking for a million tokens of 65536 dimensions, and one within every limit whose
    config asks for a model of about 4 GB over a small model's weights: each a 422 naming the limit or the shape,
    before the inference worker builds anything; then an honest archive imports."""
    from pathlib import Path

    pid = _start(stack, "inference", "server", pool="threads", concurrency=2)
    api = stack.api("mallory")
    honest, folder = _native_export(tmp_path)
    for name, model, message in (
        (
            "huge.tar.gz",
            {"vocab_size": 1_000_000, "d_model": 65536},
            "config.json: model: vocab_size=1000000 is over the import limit of 256000 (IMPORT_MAX_VOCAB_SIZE=256000)",
        ),
        ("wide.tar.gz", {"d_model": 4096, "d_ff": 16384}, "but the config implies"),
    ):
        archive = forged_native(Path(folder), tmp_path / name, **model)
        response = _import(api.http, name, archive.read_bytes())
        assert response.status_code == 422, response.text
        assert message in response.json()["detail"][0]["msg"], response.json()
    imported = _import(api.http, "small-native.tar.gz", honest)
    assert imported.status_code == 201, imported.text
    assert imported.json()["source"] == "import"
    _alive_and_clean(stack, "server", pid)
