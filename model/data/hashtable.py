"""A compact table of 64-bit hashes, to find repeated rows in a stream of millions without keeping their text.

Duplicate detection needs "have I seen this row before?" answered row by row, in file order: the data report
counts the extra copies as it reads, and the deduplicating filter keeps the first copy of each row and drops the
others while streaming. A Python set of strings would hold every sentence (gigabytes at 5M pairs), and even a set
of ints costs about 70 bytes an entry. Here keys are 64-bit hashes (xxh64 of the text, see `model/data/problems`)
in an open-addressing table (linear probing) over `array("Q")`: 8 bytes a slot, at most 3/4 full, doubled when
it would be fuller, so 11 to 21 bytes a distinct key (plus 4 a slot when values are kept: the first target
of each source). Two different rows share a hash with probability about n^2 / 2^65: once in 1.5 million corpora
of 5M rows.
"""

from __future__ import annotations

from array import array

_EMPTY = 0  # slot marker; a key that hashes to 0 is stored as 1 (one more collision in 2^64)
_MIN_CAPACITY = 1 << 10


class HashTable64:
    """Distinct 64-bit keys, optionally each with the 32-bit value it was first inserted with.

    `insert(key, value)` returns None when the key is new (and stores it), else the value stored with it first;
    `with_values=False` keeps no values (a set: 0 is returned for a known key).
    """

    def __init__(self, with_values: bool = False, capacity: int = _MIN_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity} must be at least 1")
        size = _MIN_CAPACITY
        while size < capacity:
            size <<= 1
        self._with_values = with_values
        self._allocate(size)
        self._len = 0

    def _allocate(self, size: int) -> None:
        self._mask = size - 1
        self._limit = size * 3 // 4
        self._keys = array("Q", bytes(8 * size))
        self._values = array("I", bytes(4 * size)) if self._with_values else None  # C unsigned int: 4 bytes

    def __len__(self) -> int:
        return self._len

    @property
    def nbytes(self) -> int:
        """Bytes held by the table's arrays (what it costs in memory, give or take the object headers)."""
        values = self._values
        return self._keys.itemsize * len(self._keys) + (values.itemsize * len(values) if values is not None else 0)

    def insert(self, key: int, value: int = 0) -> int | None:
        key = key or 1
        keys, mask = self._keys, self._mask
        i = key & mask
        while True:
            found = keys[i]
            if found == _EMPTY:
                break
            if found == key:
                return self._values[i] if self._values is not None else 0
            i = (i + 1) & mask
        keys[i] = key
        if self._values is not None:
            self._values[i] = value & 0xFFFFFFFF
        self._len += 1
        if self._len > self._limit:
            self._grow()
        return None

    def __contains__(self, key: int) -> bool:
        key = key or 1
        keys, mask = self._keys, self._mask
        i = key & mask
        while keys[i] != _EMPTY:
            if keys[i] == key:
                return True
            i = (i + 1) & mask
        return False

    def _grow(self) -> None:
        old_keys, old_values = self._keys, self._values
        self._allocate(2 * len(old_keys))
        keys, values, mask = self._keys, self._values, self._mask
        for slot, key in enumerate(old_keys):
            if key == _EMPTY:
                continue
            i = key & mask
            while keys[i] != _EMPTY:
                i = (i + 1) & mask
            keys[i] = key
            if values is not None and old_values is not None:
                values[i] = old_values[slot]
