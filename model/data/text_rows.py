"""A corpus's rows kept on disk, not in memory: what a training job reads its dataset into.

TextRows holds every side of every row as UTF-8 in one temporary file with a (n * width + 1,) array of offsets
(fairseq's indexed datasets keep token ids the same way; here it is the text, since the tokenizer is trained on it
first). Rows are decoded when they are read, a chunk at a time, so a job holds the ids it trains on and not the
strings they came from: 1,000,000 pairs of 5-30 words took 424 MB as a list of (source, target) strings and take
17 MB of offsets, and preparing them peaked at 844 MB instead of 1,231 (bench/prepare_memory.py). The file is read
with pread rather than memory-mapped: mapped pages that have been read count in the process's resident size until
the kernel reclaims them. The file is unlinked as soon as it is made: it goes away with the process, however that
ends.

Rows are (source, target) pairs (width 2) or sentences (width 1). Subset is a view of some of them, in the order
of its indices (the training rows once a validation set is held out).
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast, overload

import numpy as np

Row = tuple[str, str] | str
READ_CHUNK = 4096  # rows decoded per slice when iterating


class TextRows(Sequence[Any]):
    """Rows as UTF-8 in a temporary file; rows[i] decodes row i, rows[a:b] a list of rows (one read for all)."""

    def __init__(self, source: BinaryIO | bytes, offsets: np.ndarray, width: int) -> None:
        if width not in (1, 2):
            raise ValueError(f"width={width} must be 1 (sentences) or 2 (pairs)")
        if (len(offsets) - 1) % width:
            raise ValueError(f"{len(offsets) - 1} sides is not a whole number of rows of width {width}")
        self._source: BinaryIO | bytes | None = source
        self._offsets, self.width = offsets, width

    @classmethod
    def write(cls, rows: Iterable[Row], width: int, directory: str | Path | None = None) -> TextRows:
        """rows written to a temporary file in directory (None: the system's); a row of width 2 is a (source,
        target) pair, of width 1 a string."""
        file = tempfile.TemporaryFile(dir=directory)  # unlinked at once: nothing to clean up
        ends = array("q")
        end = 0
        for row in rows:
            sides = (row,) if isinstance(row, str) else row
            if len(sides) != width:
                raise ValueError(f"row {len(ends) // width} has {len(sides)} sides, expected {width}")
            for side in sides:
                encoded = side.encode("utf-8")
                file.write(encoded)
                end += len(encoded)
                ends.append(end)
        file.flush()
        offsets = np.concatenate((np.zeros(1, dtype=np.int64), np.frombuffer(ends, dtype=np.int64)))
        return cls(cast(BinaryIO, file), offsets, width)

    @classmethod
    def of(cls, rows: Sequence[Row], width: int) -> TextRows:
        """rows held in memory the same way (tests, small corpora)."""
        encoded = [s.encode("utf-8") for row in rows for s in ((row,) if isinstance(row, str) else row)]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        return cls(b"".join(encoded), offsets, width)

    def __len__(self) -> int:
        return (len(self._offsets) - 1) // self.width

    def _bytes(self, start: int, stop: int) -> bytes:
        """The file's bytes [start, stop): read with pread, not mapped, so what is read is not counted as this
        process's memory once decoded."""
        if self._source is None:
            raise ValueError("these rows are closed")
        if isinstance(self._source, bytes):
            return self._source[start:stop]
        return os.pread(self._source.fileno(), stop - start, start)

    def between(self, start: int, stop: int) -> list[Any]:
        """Rows start..stop-1 (0 <= start <= stop <= len), decoded from one read."""
        w, offsets = self.width, self._offsets
        base = int(offsets[start * w])
        blob = self._bytes(base, int(offsets[stop * w]))
        cuts = (offsets[start * w : stop * w + 1] - base).tolist()
        sides = [blob[cuts[j] : cuts[j + 1]].decode("utf-8") for j in range(len(cuts) - 1)]
        return sides if w == 1 else list(zip(sides[0::2], sides[1::2]))

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self.between(start, max(start, stop))
            return [self.between(i, i + 1)[0] for i in range(start, stop, step)]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"row {index} of {n}")
        return self.between(index % n, index % n + 1)[0]

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, len(self), READ_CHUNK):
            yield from self.between(start, min(start + READ_CHUNK, len(self)))

    @property
    def nbytes(self) -> int:
        """Bytes of text in the file."""
        return int(self._offsets[-1])

    def close(self) -> None:
        """Close the file, which frees its space (also done when the object is collected)."""
        if self._source is not None and not isinstance(self._source, bytes):
            self._source.close()
        self._source = None


class Subset(Sequence[Any]):
    """rows[indices[0]], rows[indices[1]], ... as a sequence of its own, holding only the indices."""

    def __init__(self, rows: Sequence[Any], indices: np.ndarray) -> None:
        self._rows, self._indices = rows, indices

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self._gather(self._indices[index])
        return self._rows[int(self._indices[index])]

    def _gather(self, indices: np.ndarray) -> list[Any]:
        """rows[i] for i in indices; increasing indices that are close together (a training set with a few rows
        held out) come from one read of the rows between the first and the last."""
        if len(indices) == 0:
            return []
        first, last = int(indices[0]), int(indices[-1])
        if isinstance(self._rows, TextRows) and last >= first and last - first < 2 * len(indices) + 16:
            if bool(np.all(np.diff(indices) > 0)):
                span = self._rows.between(first, last + 1)
                return [span[int(i) - first] for i in indices]
        return [self._rows[int(i)] for i in indices]

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, len(self), READ_CHUNK):
            yield from self[start : start + READ_CHUNK]
