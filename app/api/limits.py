"""Request body size limits, enforced before the body is parsed (413 naming the limit)."""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.settings import get_settings

DATASET_PATHS = ("/v1/datasets", "/v1/models/import")  # streamed to the artifact store
UPLOAD_PATTERNS = (re.compile(r"^/v1/models/[^/]+/translations$"),)  # a file to translate


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    """Refuse bodies over the limit: by Content-Length up front, or by counting a streamed body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    @staticmethod
    def limit_for(path: str) -> tuple[int, str]:
        settings = get_settings()
        if path.rstrip("/") in DATASET_PATHS:
            return settings.max_dataset_mb * 1024 * 1024, f"MAX_DATASET_MB={settings.max_dataset_mb}"
        if any(p.match(path.rstrip("/")) for p in UPLOAD_PATTERNS):
            return settings.max_upload_mb * 1024 * 1024, f"MAX_UPLOAD_MB={settings.max_upload_mb}"
        return settings.max_body_kb * 1024, f"MAX_BODY_KB={settings.max_body_kb}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        limit, name = self.limit_for(scope["path"])
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(send, int(declared), limit, name)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send, received, limit, name)

    @staticmethod
    async def _refuse(send: Send, size: int, limit: int, name: str) -> None:
        body = json.dumps(
            {"detail": f"request body of {size} bytes exceeds the limit of {limit} bytes ({name})"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
