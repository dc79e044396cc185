"""The dashboard: static files from app/dashboard/ served at /dashboard (no build step, nothing fetched
from elsewhere). The page itself calls the public /v1 API with the key the user signs in with.

Every answer says `Cache-Control: no-cache` with an ETag, so a browser revalidates (cheap 304) and never
runs a stale app.js against a newer API.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from fastapi import APIRouter, Request, Response

from app.api.errors import not_found

router = APIRouter(tags=["dashboard"], include_in_schema=False)
STATIC_DIR = Path(__file__).resolve().parents[1] / "dashboard"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*\.(html|js|css|svg)$")
HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'self'"
    ),
}


def _file(request: Request, name: str) -> Response:
    """One file of app/dashboard/ by bare name (no folders, so no path tricks), with its ETag."""
    path = STATIC_DIR / name
    if not _NAME.match(name) or not path.is_file():
        raise not_found("dashboard file", name)
    body = path.read_bytes()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {**HEADERS, "ETag": etag}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=CONTENT_TYPES[path.suffix], headers=headers)


@router.get("/dashboard")
def dashboard_index(request: Request) -> Response:
    return _file(request, "index.html")


@router.get("/dashboard/{name}")
def dashboard_file(name: str, request: Request) -> Response:
    return _file(request, name)
