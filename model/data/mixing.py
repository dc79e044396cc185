"""Mixed fine-tuning (Chu et al., 2017): a model adapted to a few new pairs (a user's corrections) trains on them
oversampled among rows of its original data, so it learns the new domain without forgetting the old one.

mix() takes the new rows and the old ones (on disk: TextRows) and returns the training rows, a view holding no copy:
the new rows repeated so that they are about `share` of the whole, among a random sample of at most OLD_ROWS_CAP old
rows. With no validation rows given it holds some out of both, disjoint from the training rows (never a repeat of a
training row), in the proportions of the mix, so early stopping and the best checkpoint weigh both domains.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from model.data.text_rows import Subset

OLD_ROWS_CAP = 50_000  # old rows sampled: enough for the old domain to hold, small enough to tokenise in seconds
MIN_NEW_TO_VALIDATE = 10  # fewer new rows than this all train; the validation rows then come from the old data


class Chain(Sequence[Any]):
    """Sequences one after another as one (the same list may appear several times: a repeat costs nothing)."""

    def __init__(self, parts: Sequence[Sequence[Any]]) -> None:
        self._parts = [p for p in parts if len(p)]
        self._ends = np.cumsum([len(p) for p in self._parts], dtype=np.int64)

    def __len__(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return self._span(start, stop)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} rows")
        part = int(np.searchsorted(self._ends, index, side="right"))
        begin = int(self._ends[part - 1]) if part else 0
        return self._parts[part][index - begin]

    def _span(self, start: int, stop: int) -> list[Any]:
        """rows[start:stop], each part's share read as one slice."""
        out: list[Any] = []
        while start < stop:
            part = int(np.searchsorted(self._ends, start, side="right"))
            begin, end = (int(self._ends[part - 1]) if part else 0), int(self._ends[part])
            upto = min(stop, end)
            out.extend(self._parts[part][start - begin : upto - begin])
            start = upto
        return out

    def __iter__(self) -> Iterator[Any]:
        for part in self._parts:
            yield from part

    def distinct_len(self) -> int:
        """Rows counting a part repeated in the chain once: the data behind the view (what rules sized by a corpus
        must count, not its repeats)."""
        return sum(len(p) for p in {id(p): p for p in self._parts}.values())


def distinct_len(rows: Sequence[Any]) -> int:
    """len(rows), a Chain's repeated parts counted once."""
    return rows.distinct_len() if isinstance(rows, Chain) else len(rows)


@dataclass(frozen=True)
class Mixed:
    train: Sequence[Any]
    valid: list[Any] | None  # None: the caller's validation rows stand
    repeats: int  # how many times each training new row appears
    old_rows: int  # old rows sampled into the training rows
    share: float  # the new rows' share of the training rows, as realised

    def describe(self) -> dict[str, Any]:
        return {"repeats": self.repeats, "old_rows": self.old_rows, "share": round(self.share, 4)}


def mix(
    new: Sequence[Any],
    old: Sequence[Any],
    share: float,
    seed: int,
    *,
    hold_out: float | None = None,
    max_valid: int = 1000,
    old_cap: int = OLD_ROWS_CAP,
) -> Mixed:
    """Training rows with the `new` rows at about `share` (0 < share < 1) among a sample of `old`; hold_out: the
    fraction of each held out for validation (None: the caller has validation rows). Fixed by `seed`."""
    if not 0 < share < 1:
        raise ValueError(f"share={share} must lie strictly between 0 and 1")
    if not new:
        raise ValueError("no new rows to mix in")
    rng = random.Random(f"mix:{seed}")
    new_order = list(range(len(new)))
    old_order = rng.sample(range(len(old)), min(len(old), old_cap + max_valid))  # range: no list of all len(old)
    valid: list[Any] | None = None
    new_valid = old_valid = 0
    if hold_out is not None:
        if len(new) >= MIN_NEW_TO_VALIDATE:
            new_valid = min(max_valid, max(1, round(len(new) * hold_out)))
        old_valid = min(max_valid - new_valid, max(1, round(new_valid * (1 - share) / share)), max(0, len(old) - 1))
        rng.shuffle(new_order)
        held_new, new_order = sorted(new_order[:new_valid]), sorted(new_order[new_valid:])
        valid = [new[i] for i in held_new] + [old[i] for i in sorted(old_order[:old_valid])]
        if not valid:
            raise ValueError("nothing to validate on: no old rows and too few new ones to hold any out")
    old_train = np.array(sorted(old_order[old_valid : old_valid + old_cap]), dtype=np.int64)
    train_new = new if len(new_order) == len(new) else Subset(new, np.array(new_order, dtype=np.int64))
    repeats = max(1, round(share / (1 - share) * len(old_train) / len(train_new)))
    train = Chain([*([train_new] * repeats), Subset(old, old_train)])
    return Mixed(train, valid, repeats, len(old_train), repeats * len(train_new) / len(train))
