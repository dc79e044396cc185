"""Uploads built to exhaust a worker, on a real stack (uvicorn, Celery workers, PostgreSQL, Redis): each worker's
memory capped as a container's is, so that one that tries to hold what the upload unpacks to gets MemoryError here
rather than the test host's memory. Each bomb is refused naming the limit; the worker that refused it is the same
process afterwards, with nothing sent again, and handles the next upload as ever."""

from __future__ import annotations

from app.core.task_names import PROCESS_DATASET
from tests.reliability.conftest import Stack
from tests.support.bombs import MB, zeros_gz
from tests.support.client import write_jsonl
from tests.support.stack import healthy_with_workers, wait_for

MEMORY_CAP_MB = 2048
CRASHES = ("MemoryError", "WorkerLostError", "exited prematurely", "Traceback")


def _start(stack: Stack, queues: str, name: str, **kwargs) -> int:
    worker = stack.processes.start_worker(stack.env, queues, name, memory_limit_mb=MEMORY_CAP_MB, **kwargs)
    wait_for(healthy_with_workers(stack.url, 1), timeout=90, what=f"worker {name}")
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
