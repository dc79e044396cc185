"""Where the server is, which key to send, and what an HTTP error means to a person at a terminal.

The key, first found wins: `--key KEY`, then $TRANSFORMER_API_KEY, then the file $DATA_DIR/local-api-key
(`var/local-api-key` by default, written by `make run`). Without one a command stops with exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import httpx

KEY_VARIABLE = "TRANSFORMER_API_KEY"
URL_VARIABLE = "TRANSFORMER_URL"
DEFAULT_URL = "http://127.0.0.1:8000"
MISSING_KEY_EXIT = 2


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=os.environ.get(URL_VARIABLE, DEFAULT_URL), help=f"the API (${URL_VARIABLE}, {DEFAULT_URL})"
    )
    parser.add_argument("--key", help=f"API key (else ${KEY_VARIABLE}, else the file {local_key_file()})")


def local_key_file() -> Path:
    return Path(os.environ.get("DATA_DIR", "var")) / "local-api-key"


def api_key(args: argparse.Namespace) -> str:
    """The key of `--key`, else of $TRANSFORMER_API_KEY, else of the local key file; exits 2 naming all three."""
    if args.key:
        return str(args.key)
    if os.environ.get(KEY_VARIABLE):
        return os.environ[KEY_VARIABLE]
    path = local_key_file()
    key = path.read_text().strip() if path.is_file() else ""
    if not key:
        print(
            f"error: no API key: pass --key KEY, set {KEY_VARIABLE}, or put the key in {path} "
            "(`make run` writes it there)",
            file=sys.stderr,
        )
        raise SystemExit(MISSING_KEY_EXIT)
    return key


def open_client(args: argparse.Namespace) -> httpx.Client:
    """The one place a command gets its HTTP client (tests replace it with the API in process)."""
    return httpx.Client(base_url=args.url, headers={"Authorization": f"Bearer {api_key(args)}"}, timeout=60)


def path(*segments: str) -> str:
    """`/v1/models/ID/...` with each id quoted as one path segment: `my-en-de@production` travels unchanged,
    a `/`, `?` or `#` in an id cannot change the route."""
    return "/v1/" + "/".join(quote(segment, safe="@") for segment in segments)


def fail(message: str) -> NoReturn:
    sys.exit(f"error: {message}")


def detail_of(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text
    if isinstance(detail, list):  # FastAPI's validation errors: the field's dotted path, then the message
        detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}" for d in detail)
    return str(detail)


def check(response: httpx.Response) -> Any:
    """The response's JSON (None when empty); an HTTP error exits 1 with `error STATUS: detail`."""
    if response.status_code >= 400:
        if not response.is_closed:
            response.read()
        sys.exit(f"error {response.status_code}: {detail_of(response)}")
    return response.json() if response.content else None


def page_through(
    client: httpx.Client, route: str, params: dict[str, Any], limit: int | None
) -> Iterator[dict[str, Any]]:
    """Every item of a `limit`/`offset` list route (at most `limit`), page by page, newest first."""
    offset, seen = 0, set[str]()
    while limit is None or len(seen) < limit:
        size = 200 if limit is None else min(200, limit - len(seen))
        page = check(client.get(route, params={**params, "limit": size, "offset": offset}))
        for item in page["data"]:
            if item["id"] not in seen:  # a row created while paging shifts the rest by one: never twice
                seen.add(item["id"])
                yield item
        offset += len(page["data"])
        if not page["data"] or offset >= page["total"]:
            return
