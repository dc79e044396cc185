"""Refuse a NUL character (U+0000) in a request's URL or JSON body with a 422 naming where it is.

PostgreSQL's text cannot hold NUL: without this, a NUL in a query parameter (`?tag=a%00b`), a path or a body field
reached the database and came back as a 500. SQLite stores it, so the embedded default would have let it through.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.schemas.common import NUL_MESSAGE


def _where(scope: Scope) -> list[str] | None:
    """The location of the first NUL in the URL, as FastAPI names a parameter: ["query", name] or ["path"]."""
    if "\x00" in scope.get("path", ""):
        return ["path"]
    query = scope.get("query_string", b"")
    if b"\x00" in query or b"%00" in query:
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if "\x00" in name or "\x00" in value:
                return ["query", name.replace("\x00", "")]
        return ["query"]
    return None


class NulGuard:
    """ASGI middleware for the URL; app.schemas.common.Input does the same for every JSON body's fields."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        where = _where(scope) if scope["type"] == "http" else None
        if where is None:
            await self.app(scope, receive, send)
            return
        detail = [{"type": "value_error", "loc": where, "msg": f"{where[-1]} {NUL_MESSAGE}"}]
        await JSONResponse({"detail": detail}, status_code=422)(scope, receive, send)
