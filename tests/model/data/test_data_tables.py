"""The compact hash table behind duplicate detection, and the bounded distributions of the data report."""

import pytest

from model.data.distribution import LengthCounts, RatioCounts
from model.data.hashtable import HashTable64


def _spread(i: int) -> int:
    return (i * 0x9E3779B97F4A7C15) & (2**64 - 1)  # keys spread over 64 bits, as hashes are


def test_a_set_of_hashes_grows_and_remembers_every_key():
    table = HashTable64()
    keys = [_spread(i) for i in range(5000)]  # 0 included
    assert all(table.insert(k) is None for k in keys)
    assert all(table.insert(k) == 0 for k in keys)
    assert len(table) == 5000 and all(k in table for k in keys) and 12345 not in table
    assert table.nbytes <= 21 * 5000 + 8 * 1024  # 8 bytes a slot, at most 3/4 full


def test_a_map_keeps_the_first_value_of_each_key():
    table = HashTable64(with_values=True)
    assert table.insert(7, 100) is None
    assert table.insert(7, 200) == 100
    for k in range(1, 3000):  # through several doublings
        table.insert(_spread(k), k)
    assert table.insert(7, 300) == 100 and table.insert(_spread(2999), 0) == 2999


def test_length_percentiles_are_exact_nearest_ranks():
    counts = LengthCounts()
    for length in range(1, 101):  # 1..100
        counts.add(length)
    summary = counts.summary()
    assert summary["percentiles"] == {"p1": 1, "p5": 5, "p25": 25, "p50": 50, "p75": 75, "p95": 95, "p99": 99}
    assert (summary["total"], summary["min"], summary["max"], summary["mean"]) == (5050, 1, 100, 50.5)
    histogram = summary["histogram"]
    assert len(histogram["edges"]) == len(histogram["counts"]) + 1 <= 22
    assert sum(histogram["counts"]) + histogram["above"] == 100 and histogram["above"] <= 1


def test_an_empty_distribution_says_so():
    assert LengthCounts().summary()["histogram"] is None
    assert RatioCounts().summary() == {"pairs": 0, "percentiles": {}, "histogram": None}


def test_ratio_percentiles_are_within_a_fine_bin():
    ratios = RatioCounts()
    for r in [0.5] * 10 + [1.0] * 80 + [2.0] * 10:
        ratios.add(r)
    summary = ratios.summary()
    assert summary["percentiles"]["p50"] == pytest.approx(1.0, rel=0.023)
    assert summary["percentiles"]["p5"] == pytest.approx(0.5, rel=0.023)
    assert summary["percentiles"]["p99"] == pytest.approx(2.0, rel=0.023)
    histogram = summary["histogram"]
    assert histogram["edges"][0] == 0.125 and histogram["edges"][-1] == 8.0 and sum(histogram["counts"]) == 100
