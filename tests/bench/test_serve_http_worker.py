"""bench/serve_http.py measures the idle CPU of its own service's inference worker: found among the descendants of
that service's `serve` process, never another service's (a test suite runs several at once, and theirs end)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from bench.serve_http import inference_worker_pid

# A process whose command line reads as an inference worker's (`... celery ... -Q inference`), and one that starts
# it as its child, as `app.cli serve` starts its workers.
WORKER = [sys.executable, "-c", "import time; time.sleep(60)", "celery", "worker", "-Q", "inference"]
SERVE = [sys.executable, "-c", f"import subprocess, time; subprocess.Popen({WORKER!r}); time.sleep(60)"]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    children: list[subprocess.Popen[bytes]] = []
    yield children
    for child in children:
        subprocess.run(["pkill", "-P", str(child.pid)], check=False)  # its worker
        child.kill()
        child.wait()


def test_the_worker_is_the_one_under_the_given_serve_process(started: list[subprocess.Popen[bytes]]) -> None:
    ours = subprocess.Popen(SERVE)
    time.sleep(0.5)
    other = subprocess.Popen(SERVE)  # another service, started later: the newest worker on the machine is its
    started += [ours, other]
    deadline = time.monotonic() + 30
    while None in (found := inference_worker_pid(ours.pid), theirs := inference_worker_pid(other.pid)):
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.1)
    assert found != theirs and not {found, theirs} & {ours.pid, other.pid}
    stat = open(f"/proc/{found}/stat").read().rsplit(")", 1)[1].split()
    assert int(stat[1]) == ours.pid  # its parent


def test_a_serve_process_without_a_worker_has_none(started: list[subprocess.Popen[bytes]]) -> None:
    lone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started.append(lone)
    assert inference_worker_pid(lone.pid) is None
