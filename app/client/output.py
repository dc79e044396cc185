"""How lists are printed: an aligned table for people, JSON lines (one object a line) with `--json` for programs."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

Column = tuple[str, Callable[[dict[str, Any]], Any]]  # header, and how to get the cell from an item


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object a line (JSON lines), as the API gives it")
    parser.add_argument("--limit", type=int, metavar="N", help="at most N, newest first (default: every one)")


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(rows: Sequence[Sequence[str]]) -> str:
    """Columns as wide as their widest cell, two spaces apart, no trailing blanks."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def print_items(items: Iterable[dict[str, Any]], columns: Sequence[Column], as_json: bool) -> None:
    """JSON lines as the items come (a long list streams), else one table once every item is in."""
    if as_json:
        for item in items:
            print(json.dumps(item, default=str), flush=True)
        return
    rows = [[cell(get(item)) for _, get in columns] for item in items]
    print(table([[header for header, _ in columns], *rows]))


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def when(item: dict[str, Any], field: str = "created_at") -> str:
    """`2026-11-25 16:14` from the API's ISO time (UTC)."""
    value = item.get(field)
    return str(value)[:16].replace("T", " ") if value else "-"
