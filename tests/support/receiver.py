"""A real webhook receiver for tests: http.server on 127.0.0.1 in a thread, recording every request it gets and
answering as the test scripts it (a status, a redirect, a hang). `verified()` checks each recorded request with the
standardwebhooks library, as a receiver's own code would."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay: float = 0.0  # seconds before answering (a hanging receiver)


@dataclass
class Receiver:
    url: str
    requests: list[Received]
    replies: list[Reply]  # answered in turn; the last one again once they run out

    def verified(self, secret: str) -> list[Any]:
        """Each request's payload, verified (webhook-id, -timestamp, -signature) with `secret`; raises if one fails."""
        return [Webhook(secret).verify(r.body, r.headers) for r in self.requests]

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.requests) >= count, f"{self.url} got {len(self.requests)} requests, not {count}"
        return self.requests


@contextmanager
def receiver(*replies: Reply, answer: Callable[[int], Reply] | None = None) -> Iterator[Receiver]:
    """A receiver answering `replies` in turn (default: 200), or `answer(n)` for the n-th request (from 0)."""
    requests: list[Received] = []
    scripted = list(replies) or [Reply()]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                n = len(requests)
                requests.append(Received(self.path, dict(self.headers.items()), body, time.monotonic()))
            reply = answer(n) if answer else scripted[min(n, len(scripted) - 1)]
            if reply.delay:
                time.sleep(reply.delay)
            try:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except OSError:
                pass  # the sender gave up waiting

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Receiver(f"http://127.0.0.1:{server.server_address[1]}/hooks/in", requests, scripted)
    finally:
        server.shutdown()
        server.server_close()
