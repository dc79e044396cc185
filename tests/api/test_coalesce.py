"""Grouping of concurrent translate requests (app/services/coalesce.py), with real threads and a send that records."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from app.services.coalesce import Coalescer


class Recorder:
    """send(texts): translations are the texts upper-cased; the first call blocks until released."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def __call__(self, texts: list[str]) -> dict:
        with self.lock:
            self.calls.append(list(texts))
            first = len(self.calls) == 1
        if first:
            assert self.release.wait(10)
        if self.fail_on in texts:
            raise ValueError(f"bad text {self.fail_on!r}")
        return {"translations": [t.upper() for t in texts], "model_id": "m"}


def in_flight(pool: ThreadPoolExecutor, coalescer: Coalescer, send: Recorder) -> Future:
    """A first request for key "k" (text "x"), returned once its task is sent: send holds it until released."""
    first = pool.submit(coalescer.run, "k", ["x"], send)
    while not send.calls:
        time.sleep(0.001)
    return first


def test_a_lone_request_is_sent_at_once_with_its_own_texts():
    send = Recorder()
    send.release.set()
    assert Coalescer(64, 5).run("k", ["a", "b"], send)["translations"] == ["A", "B"]
    assert send.calls == [["a", "b"]]


def test_requests_arriving_while_one_is_in_flight_travel_together_and_get_their_own_answers():
    send, coalescer = Recorder(), Coalescer(64, 5)
    with ThreadPoolExecutor(8) as pool:
        first = in_flight(pool, coalescer, send)
        later = [pool.submit(coalescer.run, "k", [f"t{i}", f"u{i}"], send) for i in range(6)]
        time.sleep(0.2)  # all six are waiting behind the first
        send.release.set()
        assert first.result(5)["translations"] == ["X"]
        for i, future in enumerate(later):
            assert future.result(5)["translations"] == [f"T{i}", f"U{i}"]
    assert len(send.calls) == 2 and sorted(send.calls[1]) == sorted(t for i in range(6) for t in (f"t{i}", f"u{i}"))


def test_other_keys_are_never_mixed():
    send, coalescer = Recorder(), Coalescer(64, 5)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(coalescer.run, "model-a", ["x"], send)
        while not send.calls:
            time.sleep(0.001)
        other = pool.submit(coalescer.run, "model-b", ["y"], send)
        assert other.result(5)["translations"] == ["Y"]  # not held back by model-a's call
        send.release.set()
        assert first.result(5)["translations"] == ["X"]


def test_a_failing_group_is_retried_request_by_request_so_errors_stay_with_their_request():
    send, coalescer = Recorder(fail_on="bad"), Coalescer(64, 5)
    with ThreadPoolExecutor(8) as pool:
        first = in_flight(pool, coalescer, send)
        good = [pool.submit(coalescer.run, "k", [f"g{i}"], send) for i in range(3)]
        bad = pool.submit(coalescer.run, "k", ["bad"], send)
        time.sleep(0.2)
        send.release.set()
        first.result(5)
        assert [f.result(5)["translations"] for f in good] == [["G0"], ["G1"], ["G2"]]
        with pytest.raises(ValueError, match="bad"):
            bad.result(5)


def test_a_group_never_carries_more_than_max_texts():
    send, coalescer = Recorder(), Coalescer(4, 5)
    with ThreadPoolExecutor(8) as pool:
        first = in_flight(pool, coalescer, send)
        later = [pool.submit(coalescer.run, "k", [f"t{i}", f"u{i}"], send) for i in range(4)]
        time.sleep(0.2)
        send.release.set()
        assert [f.result(5)["translations"] for f in later] == [[f"T{i}", f"U{i}"] for i in range(4)]
        first.result(5)
    assert max(len(call) for call in send.calls) <= 4


def test_a_full_group_goes_at_once_without_waiting_for_the_task_in_flight():
    """Two requests that fill a group are answered while the first task is still in flight; a third that would take
    the next group past max_texts sends that group and starts the one after it."""
    send, coalescer = Recorder(), Coalescer(4, 5)
    with ThreadPoolExecutor(8) as pool:
        first = in_flight(pool, coalescer, send)
        full = [pool.submit(coalescer.run, "k", [f"t{i}", f"u{i}"], send) for i in range(2)]
        assert [f.result(5)["translations"] for f in full] == [[f"T{i}", f"U{i}"] for i in range(2)]
        three = pool.submit(coalescer.run, "k", ["a", "b", "c"], send)
        while len(send.calls) < 2 or not coalescer._pending:
            time.sleep(0.001)
        two = pool.submit(coalescer.run, "k", ["d", "e"], send)  # 3 + 2 > 4: ["a", "b", "c"] goes now
        assert three.result(5)["translations"] == ["A", "B", "C"]
        assert not first.done()
        send.release.set()
        assert two.result(5)["translations"] == ["D", "E"] and first.result(5)["translations"] == ["X"]
    assert send.calls[1] in (["t0", "u0", "t1", "u1"], ["t1", "u1", "t0", "u0"])
    assert ["a", "b", "c"] in send.calls and ["d", "e"] in send.calls
