"""Server-Sent Events of a job (`GET /v1/jobs/{id}/events`), read the way the dashboard reads them
(app/dashboard/api.js `streamEvents`): a dropped connection is reopened after the server's `retry` with the
`Last-Event-ID` seen last, so no metric point is lost; the stream is over at the `end` event."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import httpx

from app.client import connection

GIVE_UP_AFTER = 30  # failed reconnections in a row (about a minute at the API's `retry: 2000`)


@dataclass
class Event:
    event: str
    data: str


@dataclass
class StreamState:
    """What survives a reconnection: the last event id and the server's retry delay."""

    last_event_id: str = ""
    retry_seconds: float = 2.0


def parse(lines: Iterable[str], state: StreamState) -> Iterator[Event]:
    """Events of the text/event-stream format (the WHATWG rules: `field: value` lines, a blank line dispatches,
    `:` starts a comment, `id` and `retry` update the state)."""
    event, data = "", list[str]()
    for line in lines:
        if not line:
            if data:
                yield Event(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            state.last_event_id = value
        elif name == "retry" and value.isdigit():
            state.retry_seconds = int(value) / 1000


def follow(
    client: httpx.Client,
    route: str,
    state: StreamState,
    on_drop: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Event]:
    """The events of `route` up to and including `end`, across dropped connections; a 4xx exits with its
    detail, and GIVE_UP_AFTER failures in a row exit naming the last one."""
    failures = 0
    while True:
        headers = {"Accept": "text/event-stream"}
        if state.last_event_id:
            headers["Last-Event-ID"] = state.last_event_id
        try:
            # the API sends a keep-alive comment every 15 s: a minute of silence is a dead connection
            with client.stream("GET", route, headers=headers, timeout=httpx.Timeout(60.0)) as response:
                if response.status_code >= 400 and response.status_code not in (429, 502, 503, 504):
                    connection.check(response)
                if response.status_code >= 400:
                    response.read()
                    reason = f"HTTP {response.status_code}: {connection.detail_of(response)}"
                else:
                    for event in parse(response.iter_lines(), state):
                        failures = 0
                        yield event
                        if event.event == "end":
                            return
                    reason = "the server closed the stream"
        except httpx.TransportError as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        failures += 1
        if failures >= GIVE_UP_AFTER:
            connection.fail(f"lost the job's events {failures} times in a row; the last time: {reason}")
        on_drop(f"events interrupted ({reason}); reconnecting in {state.retry_seconds:g}s")
        sleep(state.retry_seconds)
