"""Reading and validating corpus files: parallel (JSONL or TSV) and monolingual (one sentence a line).

Torch-free and tokenizer-free on purpose: the API server validates uploads with these functions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

ParallelFormat = Literal["auto", "jsonl", "tsv"]
_JSONL_SUFFIXES = {".jsonl", ".json", ".ndjson"}
_TSV_SUFFIXES = {".tsv", ".tab"}


class DataError(ValueError):
    """A malformed corpus; `line` is the 1-based line number, or None for whole-file problems."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


def _lines(data: bytes) -> list[tuple[int, str]]:
    """(1-based line number, text) for every non-blank line; refuses bytes that are not UTF-8."""
    try:
        text = data.decode("utf-8-sig")  # a leading byte-order mark is tolerated
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(f"not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})", line) from e
    # split("\n") rather than splitlines(): line numbers then match editors, and U+2028 stays inside a sentence.
    rows = [(n, raw.rstrip("\r")) for n, raw in enumerate(text.split("\n"), start=1)]
    return [(n, line) for n, line in rows if line.strip()]


def _sentence(value: str, field: str, line: int) -> str:
    value = value.strip()
    if not value:
        raise DataError(f"empty {field}", line)
    return value


def _jsonl_row(text: str, line: int) -> tuple[str, str]:
    try:
        row: Any = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON: {e.msg} (column {e.colno})", line) from e
    if not isinstance(row, dict):
        raise DataError(f'expected a JSON object with "source" and "target", got {type(row).__name__}', line)
    out = []
    for field in ("source", "target"):
        if field not in row:
            raise DataError(f'missing field "{field}"', line)
        if not isinstance(row[field], str):
            raise DataError(f'field "{field}" must be a string, got {type(row[field]).__name__}', line)
        out.append(_sentence(row[field], field, line))
    return out[0], out[1]


def _tsv_row(text: str, line: int) -> tuple[str, str]:
    columns = text.split("\t")
    if len(columns) != 2:
        raise DataError(f"expected 2 tab-separated columns (source, target), got {len(columns)}", line)
    return _sentence(columns[0], "source", line), _sentence(columns[1], "target", line)


def parse_parallel_bytes(data: bytes, fmt: ParallelFormat = "auto") -> list[tuple[str, str]]:
    """(source, target) pairs from JSONL ({"source": ..., "target": ...}) or TSV ("source<TAB>target").

    fmt="auto" reads JSONL if the first non-blank line starts with "{", else TSV. Blank lines are skipped,
    sentences are stripped; the first problem raises DataError naming its line.
    """
    lines = _lines(data)
    if not lines:
        raise DataError("no rows: the file is empty")
    if fmt == "auto":
        fmt = "jsonl" if lines[0][1].lstrip().startswith("{") else "tsv"
    if fmt not in ("jsonl", "tsv"):
        raise ValueError(f"fmt={fmt!r} must be 'auto', 'jsonl' or 'tsv'")
    parse_row = _jsonl_row if fmt == "jsonl" else _tsv_row
    return [parse_row(text, n) for n, text in lines]


def parse_monolingual_bytes(data: bytes) -> list[str]:
    """One stripped sentence per non-blank line."""
    sentences = [text.strip() for _, text in _lines(data)]
    if not sentences:
        raise DataError("no rows: the file is empty")
    return sentences


def read_parallel(path: str | Path, fmt: ParallelFormat = "auto") -> list[tuple[str, str]]:
    """parse_parallel_bytes on a file; with fmt="auto" a .jsonl/.json or .tsv suffix decides the format."""
    path = Path(path)
    if fmt == "auto":
        suffix = path.suffix.lower()
        fmt = "jsonl" if suffix in _JSONL_SUFFIXES else "tsv" if suffix in _TSV_SUFFIXES else "auto"
    return parse_parallel_bytes(path.read_bytes(), fmt)


def read_monolingual(path: str | Path) -> list[str]:
    return parse_monolingual_bytes(Path(path).read_bytes())


def _length_stats(texts: Sequence[str]) -> dict[str, float | int]:
    lengths = [len(t) for t in texts]
    return {
        "characters": sum(lengths),
        "min": min(lengths),
        "mean": round(sum(lengths) / len(lengths), 2),
        "max": max(lengths),
    }


def dataset_stats(rows: Sequence[tuple[str, str]] | Sequence[str]) -> dict[str, Any]:
    """Row count, total characters, and per side {"characters", "min", "mean", "max"} in characters.

    Pairs give sides "source" and "target"; sentences give the side "text".
    """
    if not rows:
        return {"rows": 0, "characters": 0}
    if isinstance(rows[0], str):
        sides = {"text": _length_stats(rows)}  # type: ignore[arg-type]
    else:
        sides = {"source": _length_stats([r[0] for r in rows]), "target": _length_stats([r[1] for r in rows])}
    return {"rows": len(rows), "characters": sum(s["characters"] for s in sides.values()), **sides}
