"""Micro-batching: requests that arrive together are decoded together.

Each request thread calls `submit(key, items)` and blocks; one batching thread waits up to `max_wait`
after the first request of a key (or until `max_batch` items are waiting), runs `run_batch` once over all
their items, and hands each request its slice of the results. Requests are never split across batches.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)  # what requests that may share a batch have in common


@dataclass
class _Request:
    items: Sequence[Any]
    done: threading.Event = field(default_factory=threading.Event)
    results: list[Any] | None = None
    error: BaseException | None = None
    batch_size: int = 0  # items in the batch it was decoded in


class MicroBatcher(Generic[K]):
    def __init__(
        self,
        run_batch: Callable[[K, list[Any]], list[Any]],
        max_batch: int = 32,
        max_wait: float = 0.005,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self.run_batch, self.max_batch, self.max_wait, self.on_batch = run_batch, max_batch, max_wait, on_batch
        self._waiting: OrderedDict[K, list[tuple[float, _Request]]] = OrderedDict()
        self._cond = threading.Condition()
        threading.Thread(target=self._loop, name="microbatch", daemon=True).start()

    def submit(self, key: K, items: Sequence[Any]) -> list[Any]:
        return self.submit_sized(key, items)[0]

    def submit_sized(self, key: K, items: Sequence[Any]) -> tuple[list[Any], int]:
        """Like `submit`; also returns how many items the batch this request was decoded in held."""
        request = _Request(items)
        with self._cond:
            self._waiting.setdefault(key, []).append((time.monotonic(), request))
            self._cond.notify()
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.results is not None
        return request.results, request.batch_size

    def _take(self) -> tuple[K, list[_Request]]:
        """Block until some key's batch is due; pop and return it."""
        with self._cond:
            while True:
                now, wake = time.monotonic(), None
                for key, queue in self._waiting.items():
                    size = sum(len(r.items) for _, r in queue)
                    due = queue[0][0] + self.max_wait
                    if size >= self.max_batch or now >= due:
                        return key, self._pop(key)
                    wake = due if wake is None else min(wake, due)
                self._cond.wait(None if wake is None else max(0.0, wake - now))

    def _pop(self, key: K) -> list[_Request]:
        queue, size = self._waiting[key], 0
        taken: list[_Request] = []
        while queue and (not taken or size + len(queue[0][1].items) <= self.max_batch):
            _, request = queue.pop(0)
            taken.append(request)
            size += len(request.items)
        if not queue:
            del self._waiting[key]
        return taken

    def _loop(self) -> None:
        while True:
            key, requests = self._take()
            items = [item for r in requests for item in r.items]
            try:
                results = self.run_batch(key, items)
                if self.on_batch is not None:
                    self.on_batch(len(items))
            except BaseException as exc:  # each waiting request gets the error
                for r in requests:
                    r.error = exc
                    r.done.set()
                continue
            start = 0
            for r in requests:
                r.results, r.batch_size = results[start : start + len(r.items)], len(items)
                start += len(r.items)
                r.done.set()
