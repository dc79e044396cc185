"""A prepared translation corpus as two flat arrays of token ids: what a job trains on, in as little memory as the
ids themselves.

ExampleStore keeps every source's ids end to end in one (total,) array of Tokenizer.id_dtype, with (n + 1,)
offsets, and the same for targets (fairseq's MMapIndexedDataset layout, held in memory). store[i] is an Example of
two views into those arrays, made when it is read; batching reads the lengths from the offsets
(model/data/batching.example_lengths) without making any. On 200,000 pairs of 5-30 words (bench/prepare_memory.py)
prepare() added 669 bytes a pair with one Example of two small arrays a pair, and adds 449 this way, of which the
ids and offsets are 265.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np

from model.data.batching import Example


class TokenStore:
    """Sequences of token ids as one flat (total,) array and (n + 1,) offsets; store[i] is a view."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids, self.offsets = ids, offsets

    @classmethod
    def concat(cls, sequences: Sequence[np.ndarray], dtype: Any) -> TokenStore:
        offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in sequences], out=offsets[1:])
        ids = np.concatenate(sequences).astype(dtype, copy=False) if sequences else np.zeros(0, dtype=dtype)
        return cls(ids, offsets)

    @classmethod
    def join(cls, stores: Sequence[TokenStore], dtype: Any) -> TokenStore:
        """The stores' sequences one after another."""
        if not stores:
            return cls(np.zeros(0, dtype=dtype), np.zeros(1, dtype=np.int64))
        starts = np.cumsum([0] + [len(s.ids) for s in stores[:-1]])
        offsets = np.concatenate([np.zeros(1, dtype=np.int64)] + [s.offsets[1:] + b for s, b in zip(stores, starts)])
        return cls(np.concatenate([s.ids for s in stores]).astype(dtype, copy=False), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self.ids[self.offsets[i] : self.offsets[i + 1]]

    def select(self, keep: np.ndarray) -> TokenStore:
        """The sequences where the (n,) boolean `keep` is true, in order, in arrays of their own."""
        lengths = self.lengths[keep]
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return TokenStore(self.ids[np.repeat(keep, self.lengths)], offsets)

    def take(self, indices: np.ndarray) -> TokenStore:
        """The sequences at the (m,) integer `indices`, in their order, repeats included, in arrays of their own."""
        indices = np.asarray(indices, dtype=np.int64)
        lengths = self.lengths[indices]
        offsets = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # each new position reads its sequence's start in the old ids plus its own place within the sequence
        positions = np.repeat(self.offsets[indices] - offsets[:-1], lengths) + np.arange(offsets[-1])
        return TokenStore(self.ids[positions], offsets)

    @property
    def lengths(self) -> np.ndarray:
        """(n,) int64: the length of each sequence."""
        return np.diff(self.offsets)

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.offsets.nbytes)


class ExampleStore(Sequence[Example]):
    """Translation examples as a source and a target TokenStore of the same length."""

    def __init__(self, src: TokenStore, tgt: TokenStore) -> None:
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} sources but {len(tgt)} targets")
        self.src, self.tgt = src, tgt

    @classmethod
    def build(cls, chunks: Iterable[Sequence[Example]], dtype: Any) -> ExampleStore:
        """The examples of each chunk, in order; each chunk is made flat before the next is read, so no more than
        one chunk's examples exist as objects at once."""
        src: list[TokenStore] = []
        tgt: list[TokenStore] = []
        for chunk in chunks:
            src.append(TokenStore.concat([np.asarray(e.src_ids) for e in chunk], dtype))
            tgt.append(TokenStore.concat([np.asarray(e.tgt_ids) for e in chunk], dtype))
        return cls(TokenStore.join(src, dtype), TokenStore.join(tgt, dtype))

    @classmethod
    def join(cls, stores: Sequence[ExampleStore], dtype: Any) -> ExampleStore:
        """The stores' examples one after another."""
        return cls(TokenStore.join([s.src for s in stores], dtype), TokenStore.join([s.tgt for s in stores], dtype))

    def take(self, indices: np.ndarray) -> ExampleStore:
        """The examples at the integer `indices`, in their order, repeats included (an epoch drawn from the corpus)."""
        return ExampleStore(self.src.take(indices), self.tgt.take(indices))

    def __len__(self) -> int:
        return len(self.src)

    @overload
    def __getitem__(self, index: int) -> Example: ...
    @overload
    def __getitem__(self, index: slice) -> list[Example]: ...
    def __getitem__(self, index: int | slice) -> Example | list[Example]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"example {index} of {n}")
        i = index % n
        return Example(self.src[i], self.tgt[i])

    def __iter__(self) -> Iterator[Example]:
        for i in range(len(self)):
            yield Example(self.src[i], self.tgt[i])

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(n,) source and (n,) target lengths, read from the offsets."""
        return self.src.lengths, self.tgt.lengths

    @property
    def nbytes(self) -> int:
        return self.src.nbytes + self.tgt.nbytes
