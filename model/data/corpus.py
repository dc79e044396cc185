"""Reading and validating corpus files: parallel (JSONL or TSV) and monolingual (one sentence a line).

Torch-free and tokenizer-free on purpose: the API server validates uploads with these functions.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

ParallelFormat = Literal["auto", "jsonl", "tsv"]
_JSONL_SUFFIXES = {".jsonl", ".json", ".ndjson"}
_TSV_SUFFIXES = {".tsv", ".tab"}
GZIP_MAGIC = b"\x1f\x8b"


class DataError(ValueError):
    """A malformed corpus; `line` is the 1-based line number, or None for whole-file problems."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


def _decode(raw: bytes, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})", line) from e


@dataclass(frozen=True)
class ReadLimits:
    """What reading a corpus file may hold, None for no bound: the bytes of one line (its newline not counted), and
    the bytes a compressed file unpacks to. `line_limit` and `unpacked_limit` name each bound in an error (the
    setting it comes from), so that a file which unpacks to gigabytes, or holds no newline, fails saying which."""

    line_bytes: int | None = None
    unpacked_bytes: int | None = None
    line_limit: str = ""
    unpacked_limit: str = ""


def _check_limits(raw: bytes, line: int, unpacked: int, compressed: bool, limits: ReadLimits) -> None:
    cap = limits.line_bytes
    if cap is not None and len(raw) > cap and not (len(raw) == cap + 1 and raw.endswith(b"\n")):
        raise DataError(f"longer than {cap} bytes, the longest line allowed ({limits.line_limit})", line)
    if compressed and limits.unpacked_bytes is not None and unpacked > limits.unpacked_bytes:
        raise DataError(
            f"the gzip stream unpacks to more than {limits.unpacked_bytes} bytes ({limits.unpacked_limit}); "
            f"{unpacked} bytes read by this line",
            line,
        )


def text_lines(
    stream: BinaryIO, compressed: bool = False, limits: ReadLimits = ReadLimits()
) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of every non-blank line of a file object, read a line at a time (a corpus of any
    size in constant memory). A leading byte-order mark is tolerated; bytes that are not UTF-8 raise DataError naming
    their line. `compressed`: a gzip stream, whose truncation or corruption raises DataError after the last whole line.
    `limits`: a line longer than limits.line_bytes, or a gzip stream that unpacks to more than limits.unpacked_bytes,
    raises DataError naming the line reached, having held at most one line's bound in memory.
    """
    limits = limits or ReadLimits()
    source: BinaryIO = gzip.GzipFile(fileobj=stream, mode="rb") if compressed else stream  # type: ignore[assignment]
    size = -1 if limits.line_bytes is None else limits.line_bytes + 1  # one byte more: its newline, or too long
    n = unpacked = 0
    try:
        # split on b"\n" alone, as editors number lines; U+2028 stays inside a sentence.
        while raw := source.readline(size):
            n += 1
            unpacked += len(raw)
            _check_limits(raw, n, unpacked, compressed, limits)
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            text = _decode(raw, n).rstrip("\n").rstrip("\r")
            if text.strip():
                yield n, text
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise DataError(f"the gzip stream is truncated or corrupt after line {n} ({e})", n + 1) from e


def _lines(data: bytes) -> list[tuple[int, str]]:
    """text_lines of bytes in memory."""
    return list(text_lines(io.BytesIO(data)))


def sniff_format(first_line: str) -> Literal["jsonl", "tsv"]:
    """JSONL when the first non-blank line starts with "{", else TSV."""
    return "jsonl" if first_line.lstrip().startswith("{") else "tsv"


def _sentence(value: str, field: str, line: int, allow_empty: bool = False) -> str:
    value = value.strip()
    if not value and not allow_empty:
        raise DataError(f"empty {field}", line)
    return value


def _jsonl_row(text: str, line: int, allow_empty: bool = False) -> tuple[str, str]:
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
        out.append(_sentence(row[field], field, line, allow_empty))
    return out[0], out[1]


def _tsv_row(text: str, line: int, allow_empty: bool = False) -> tuple[str, str]:
    columns = text.split("\t")
    if len(columns) != 2:
        raise DataError(f"expected 2 tab-separated columns (source, target), got {len(columns)}", line)
    return _sentence(columns[0], "source", line, allow_empty), _sentence(columns[1], "target", line, allow_empty)


def iter_parallel(
    lines: Iterable[tuple[int, str]], fmt: ParallelFormat = "auto", allow_empty: bool = False
) -> Iterator[tuple[int, str, str]]:
    """(line, source, target) of each numbered non-blank line (text_lines), JSONL ({"source": ..., "target": ...})
    or TSV ("source<TAB>target"); fmt="auto" decides by the first line (sniff_format). Sentences are stripped; the
    first problem raises DataError naming its line; no line at all is "the file is empty". allow_empty: a side
    that is empty once stripped is passed on as "" (a data problem the report counts, not a malformed file)."""
    if fmt not in ("auto", "jsonl", "tsv"):
        raise ValueError(f"fmt={fmt!r} must be 'auto', 'jsonl' or 'tsv'")
    parse_row = None
    for n, text in lines:
        if parse_row is None:
            parse_row = _jsonl_row if (sniff_format(text) if fmt == "auto" else fmt) == "jsonl" else _tsv_row
        yield (n, *parse_row(text, n, allow_empty))
    if parse_row is None:
        raise DataError("no rows: the file is empty")


def iter_monolingual(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(line, stripped sentence) of each numbered non-blank line; no line at all is "the file is empty"."""
    empty = True
    for n, text in lines:
        empty = False
        yield n, text.strip()
    if empty:
        raise DataError("no rows: the file is empty")


def parse_parallel_bytes(data: bytes, fmt: ParallelFormat = "auto") -> list[tuple[str, str]]:
    """(source, target) pairs of a corpus in memory: iter_parallel over its lines."""
    return [(source, target) for _, source, target in iter_parallel(_lines(data), fmt)]


def parse_monolingual_bytes(data: bytes) -> list[str]:
    """One stripped sentence per non-blank line."""
    return [text for _, text in iter_monolingual(_lines(data))]


def is_gzip(path: str | Path) -> bool:
    """True when the file starts with gzip's magic number (whatever its name says)."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def read_parallel(path: str | Path, fmt: ParallelFormat = "auto") -> list[tuple[str, str]]:
    """The pairs of a corpus file, gzip-compressed or not; with fmt="auto" a .jsonl/.json or .tsv suffix (before
    any .gz) decides the format, else the first line."""
    path = Path(path)
    if fmt == "auto":
        suffix = Path(path.name.removesuffix(".gz")).suffix.lower()
        fmt = "jsonl" if suffix in _JSONL_SUFFIXES else "tsv" if suffix in _TSV_SUFFIXES else "auto"
    with open(path, "rb") as f:
        return [(source, target) for _, source, target in iter_parallel(text_lines(f, is_gzip(path)), fmt)]


def read_monolingual(path: str | Path) -> list[str]:
    with open(path, "rb") as f:
        return [text for _, text in iter_monolingual(text_lines(f, is_gzip(path)))]


class CorpusStats:
    """Row count, total characters, and per side {"characters", "min", "mean", "max"} in characters, a row at a time
    (a corpus of any size): sides ("source", "target") for pairs, ("text",) for sentences."""

    def __init__(self, sides: Sequence[str]) -> None:
        self.sides = tuple(sides)
        self.rows = 0
        self._sum = [0] * len(self.sides)
        self._min = [0] * len(self.sides)
        self._max = [0] * len(self.sides)

    def add(self, *texts: str) -> None:
        if len(texts) != len(self.sides):
            raise ValueError(f"expected {len(self.sides)} text(s) ({', '.join(self.sides)}), got {len(texts)}")
        for i, text in enumerate(texts):
            n = len(text)
            self._sum[i] += n
            self._min[i] = n if not self.rows else min(self._min[i], n)
            self._max[i] = max(self._max[i], n)
        self.rows += 1

    def result(self) -> dict[str, Any]:
        if not self.rows:
            return {"rows": 0, "characters": 0}
        sides = {
            side: {
                "characters": self._sum[i],
                "min": self._min[i],
                "mean": round(self._sum[i] / self.rows, 2),
                "max": self._max[i],
            }
            for i, side in enumerate(self.sides)
        }
        return {"rows": self.rows, "characters": sum(self._sum), **sides}


def dataset_stats(rows: Sequence[tuple[str, str]] | Sequence[str]) -> dict[str, Any]:
    """CorpusStats of rows in memory: pairs give sides "source" and "target", sentences the side "text"."""
    if not rows:
        return {"rows": 0, "characters": 0}
    stats = CorpusStats(("text",) if isinstance(rows[0], str) else ("source", "target"))
    for row in rows:
        stats.add(*((row,) if isinstance(row, str) else row))
    return stats.result()
