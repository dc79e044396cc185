"""Distributions in bounded memory: sentence lengths counted exactly, length ratios in fine logarithmic bins.

Lengths are small integers, so a count per length (a list indexed by length) holds the whole distribution in a few
kilobytes however many sentences there are, and gives exact percentiles (nearest rank: the smallest length such
that at least p% of the sentences are that long or shorter). Ratios are real numbers: they are counted in bins of
1/32 of a power of two (a 2.2% step) between 1/256 and 256, so their percentiles are exact to within that step.
Histograms, ready to draw, are cut from these counts at the end: `edges` has one more entry than `counts`, bin i
holds edges[i] <= x < edges[i + 1], and what lies beyond the last (or before the first) edge is counted apart.
"""

from __future__ import annotations

import math
from typing import Any

PERCENTILES = (1, 5, 25, 50, 75, 95, 99)
HISTOGRAM_BINS = 20
_RATIO_STEPS = 32  # fine bins per power of two
_RATIO_RANGE = 8  # from 2^-8 to 2^8
_RATIO_DRAW_STEP = 8  # fine bins per drawn bin: quarters of a power of two
_RATIO_DRAW_RANGE = 3  # drawn from 1/8 to 8


def _nice_width(span: float, bins: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50... that cuts `span` into at most `bins` bins."""
    width = 1
    while True:
        for factor in (1, 2, 5):
            if span / (width * factor) <= bins:
                return width * factor
        width *= 10


def _percentiles(counts: list[int], total: int, offset: int = 0) -> dict[str, int]:
    out: dict[str, int] = {}
    wanted = iter(PERCENTILES)
    p = next(wanted, None)
    seen = 0
    for value, count in enumerate(counts):
        seen += count
        while p is not None and seen * 100 >= p * total:
            out[f"p{p}"] = value + offset
            p = next(wanted, None)
    return out


class LengthCounts:
    """How many sentences have each length (characters or words)."""

    def __init__(self) -> None:
        self._counts: list[int] = []
        self.n = 0
        self.total = 0

    def add(self, length: int) -> None:
        counts = self._counts
        if length >= len(counts):
            counts.extend([0] * (length + 1 - len(counts)))
        counts[length] += 1
        self.n += 1
        self.total += length

    def summary(self) -> dict[str, Any]:
        """{"total", "min", "max", "mean", "percentiles": {"p1".."p99"}, "histogram": {"edges", "counts", "above"}}."""
        if not self.n:
            return {"total": 0, "min": None, "max": None, "mean": None, "percentiles": {}, "histogram": None}
        counts = self._counts
        low = next(i for i, c in enumerate(counts) if c)
        high = len(counts) - 1
        percentiles = _percentiles(counts, self.n)
        width = _nice_width(max(percentiles["p99"] + 1, 1), HISTOGRAM_BINS)
        edges = list(range(0, percentiles["p99"] + width + 1, width))
        binned = [sum(counts[a:b]) for a, b in zip(edges, edges[1:])]
        return {
            "total": self.total,
            "min": low,
            "max": high,
            "mean": round(self.total / self.n, 2),
            "percentiles": percentiles,
            "histogram": {"edges": edges, "counts": binned, "above": self.n - sum(binned)},
        }


class RatioCounts:
    """Positive ratios (target over source length) in fine log2 bins; see the module docstring."""

    def __init__(self) -> None:
        self._counts = [0] * (2 * _RATIO_RANGE * _RATIO_STEPS)
        self.n = 0

    def add(self, ratio: float) -> None:
        i = math.floor(math.log2(ratio) * _RATIO_STEPS) + _RATIO_RANGE * _RATIO_STEPS
        self._counts[min(max(i, 0), len(self._counts) - 1)] += 1
        self.n += 1

    @staticmethod
    def _value(index: float) -> float:
        return float(2 ** (index / _RATIO_STEPS - _RATIO_RANGE))

    def summary(self) -> dict[str, Any]:
        """{"pairs", "percentiles": {"p1".."p99"} (centres of their fine bins), "histogram": {"scale": "log2",
        "edges" (ratios, 1/8 to 8 by quarter powers of two), "counts", "below", "above"}}."""
        if not self.n:
            return {"pairs": 0, "percentiles": {}, "histogram": None}
        by_bin = _percentiles(self._counts, self.n)
        percentiles = {name: round(self._value(i + 0.5), 3) for name, i in by_bin.items()}
        first = (_RATIO_RANGE - _RATIO_DRAW_RANGE) * _RATIO_STEPS
        last = (_RATIO_RANGE + _RATIO_DRAW_RANGE) * _RATIO_STEPS
        starts = list(range(first, last + 1, _RATIO_DRAW_STEP))
        counts = [sum(self._counts[a:b]) for a, b in zip(starts, starts[1:])]
        return {
            "pairs": self.n,
            "percentiles": percentiles,
            "histogram": {
                "scale": "log2",
                "edges": [round(self._value(i), 4) for i in starts],
                "counts": counts,
                "below": sum(self._counts[:first]),
                "above": sum(self._counts[last:]),
            },
        }
