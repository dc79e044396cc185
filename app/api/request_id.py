"""A request id for every request: the client's `X-Request-ID` when it is a plausible id, else a new one. It is
bound to the request's log lines (app/core/logs.py), sent back in the response's `X-Request-ID`, and travels to the
Celery tasks the request sends (a message header), so one id finds a request's lines in the API and the worker."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import logs

HEADER = "X-Request-ID"
# What a proxy or client may send: short, printable, no spaces (a log field, never a place for a payload).
_PLAUSIBLE = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name.lower() == b"x-request-id":
            text = value.decode("latin-1")
            if _PLAUSIBLE.fullmatch(text):
                return text
            break
    return uuid.uuid4().hex


class RequestId:
    """Pure ASGI middleware (runs in the request's own context, so what it binds reaches every line)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope["headers"])
        logs.bind(request_id=rid, owner_id=None, job_id=None, model_id=None)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = rid
            await send(message)

        await self.app(scope, receive, send_with_id)
