"""Counting HTTP traffic for /metrics: a pure ASGI middleware that labels each answer with its route template.

The series themselves (HTTP_REQUESTS, HTTP_LATENCY) live with the other Prometheus collectors in
app/core/observability.py; this is the part that reads Starlette's routes and messages, so it sits with the API.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.observability import HTTP_LATENCY, HTTP_REQUESTS

UNMATCHED = "<unmatched>"  # the route label of a path no route serves: raw paths would explode the label set
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})  # any other counts as OTHER


def _match(routes: Iterable[BaseRoute], scope: Scope) -> tuple[Match, str | None]:
    """The first route that fully matches (else the first partial match, a 405), descending into included routers."""
    best: tuple[Match, str | None] = (Match.NONE, None)
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI keeps an included router whole
        if included is not None:
            match, path = _match(included.routes, scope)
        else:
            path = getattr(route, "path", None)
            match = route.matches(scope)[0] if path else Match.NONE
        if match == Match.FULL:
            return match, path
        if match == Match.PARTIAL and best[0] == Match.NONE:
            best = (match, path)
    return best


def route_template(scope: Scope) -> str:
    """The path template of the route that served (or would serve) the request, e.g. /v1/jobs/{job_id}."""
    route = scope.get("route")  # set by the router once it picked a route
    if route is not None:
        return getattr(route, "path", None) or UNMATCHED
    router = getattr(scope.get("app"), "router", None)  # answered before routing (a 413, say): match it here
    return _match(getattr(router, "routes", ()), scope)[1] or UNMATCHED


class HttpMetrics:
    """Count every HTTP answer and time it; the outermost middleware, so refusals count too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500  # 500: the app raised before answering

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            method = scope["method"] if scope["method"] in METHODS else "OTHER"
            route = route_template(scope)
            HTTP_REQUESTS.labels(method, route, str(status)).inc()
            HTTP_LATENCY.labels(method, route).observe(time.perf_counter() - started)
