"""Translate requests for the same model and options that arrive while one is on its way travel as one task.

Each inference task costs the API and the worker a fixed amount (a broker message each way, a result, task
events) whatever it carries. So within one API process, requests for the same (model, options) form groups:
the first finds nothing in flight and is sent at once (no added latency); requests that arrive while it is
in flight join one pending group, sent as a single task as soon as every task of the key in flight has come back
or the group is full (max_texts, or a request arrives that would take it past them: that request starts the next
group), and each request receives its own slice of the answer. A full group gains nothing by waiting: on an
H200, 32-text requests from 8 clients left two of them a round trip behind the others each time, and the worker
decoded them in a micro-batch of their own (115 sentences on average where 256 were sent together). A group
that fails as a whole (one text too long, say) is retried request by request, so one request's error never
becomes another's.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

# send(texts) -> answer {"translations": [one per text], ...}; raises for an error (a ServiceError in the API)
Send = Callable[[list[str]], dict[str, Any]]


@dataclass
class _Request:
    texts: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] | None = None
    alone: bool = False  # the group failed: send these texts by themselves


@dataclass
class _Group:
    requests: list[_Request] = field(default_factory=list)
    n_texts: int = 0
    closed: bool = False  # full: it goes now, whatever is in flight

    def add(self, request: _Request) -> None:
        self.requests.append(request)
        self.n_texts += len(request.texts)


class Coalescer:
    def __init__(self, max_texts: int, wait_seconds: float) -> None:
        self.max_texts = max_texts  # texts per task
        self.wait_seconds = wait_seconds  # how long a request waits for its group before going alone
        self._cond = threading.Condition()
        self._in_flight: Counter[Hashable] = Counter()  # keys -> their tasks in flight
        self._pending: dict[Hashable, _Group] = {}  # keys -> the group that goes next

    def run(self, key: Hashable, texts: list[str], send: Send) -> dict[str, Any]:
        """The answer for `texts` (its "translations" are theirs alone), sent alone or with company."""
        me = _Request(list(texts))
        with self._cond:
            pending = self._pending.get(key)
            if pending is not None and pending.n_texts + len(texts) <= self.max_texts:
                pending.add(me)
                role = "member"
                if pending.n_texts == self.max_texts:
                    self._close(key, pending)
            elif pending is None and not self._in_flight[key]:
                self._in_flight[key] += 1
                group, role = _Group(), "leader"
                group.add(me)
            elif len(texts) < self.max_texts:
                if pending is not None:  # it cannot take these texts: it goes now, and they start the next group
                    self._close(key, pending)
                group = self._pending[key] = _Group()
                group.add(me)
                role = "next"
            else:
                role = "alone"  # a full group by themselves
        if role == "alone":
            return send(me.texts)
        if role == "member":
            if not me.done.wait(self.wait_seconds) or me.alone:
                return send(me.texts)
            assert me.answer is not None
            return me.answer
        if role == "next":
            with self._cond:
                self._cond.wait_for(lambda: group.closed or not self._in_flight[key], timeout=self.wait_seconds)
                self._in_flight[key] += 1
                if self._pending.get(key) is group:
                    del self._pending[key]  # closed: later arrivals form the group after this one
        try:
            return self._send_group(group, me, send)
        finally:
            with self._cond:
                self._in_flight[key] -= 1
                if not self._in_flight[key]:
                    del self._in_flight[key]
                self._cond.notify_all()

    def _close(self, key: Hashable, group: _Group) -> None:
        """The group takes no one else and goes at once (the caller holds the lock)."""
        group.closed = True
        del self._pending[key]
        self._cond.notify_all()

    def _send_group(self, group: _Group, me: _Request, send: Send) -> dict[str, Any]:
        if len(group.requests) == 1:
            return send(me.texts)
        try:
            answer = send([text for request in group.requests for text in request.texts])
        except BaseException:
            for request in group.requests:  # each on its own, so each gets its own answer or error
                request.alone = True
                request.done.set()
            return send(me.texts)
        start = 0
        for request in group.requests:
            request.answer = {**answer, "translations": answer["translations"][start : start + len(request.texts)]}
            start += len(request.texts)
            request.done.set()
        assert me.answer is not None
        return me.answer
