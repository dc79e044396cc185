"""bench/corrupt.py makes the ground truth of the data-report benchmark; here it is checked, and so is the report
against it: on a corpus corrupted in known numbers, the report finds each kind within 10% and the filters remove it."""

from collections import Counter

import pytest

from bench.corrupt import KINDS, corrupt
from model.data.filters import FilterRules, apply_filters
from model.data.report import ReportBuilder
from tests.model.corpus_fixture import GERMAN, lexicon_pairs, numbered

PAIRS = lexicon_pairs(600)


def test_share_is_split_evenly_and_each_kind_is_what_it_says():
    rows, truth = corrupt(PAIRS, share=0.2, seed=3, other_language=GERMAN)
    assert truth == dict.fromkeys(KINDS, 30) and len(rows) == 630
    clean = set(PAIRS)
    targets = {t for _, t in PAIRS}
    changed = [(s, t) for s, t in rows if (s, t) not in clean]
    kinds = Counter("copies" if s == t else "wrong_language" if t in GERMAN else "shuffled" for s, t in changed)
    assert kinds == {"copies": 30, "shuffled": 30, "wrong_language": 30}
    assert all(t in targets for s, t in changed if s != t and t not in GERMAN)  # shuffled: real targets, moved
    assert len(rows) - len(set(rows)) == 30  # the inserted duplicates
    assert sorted({s for s, _ in rows}) == sorted({s for s, _ in PAIRS})  # sources are never changed


def test_the_same_seed_gives_the_same_corpus_and_no_other_language_means_three_kinds():
    assert corrupt(PAIRS, 0.1, 7, GERMAN) == corrupt(PAIRS, 0.1, 7, GERMAN)
    assert corrupt(PAIRS, 0.1, 7, GERMAN) != corrupt(PAIRS, 0.1, 8, GERMAN)
    rows, truth = corrupt(PAIRS, 0.1, 0)
    assert truth == {"copies": 20, "shuffled": 20, "wrong_language": 0, "duplicates": 20}


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="share=1.5"):
        corrupt(PAIRS, 1.5)
    with pytest.raises(ValueError, match="other_language has 40 sentences; 150 are needed"):
        corrupt(PAIRS, 1.0, other_language=GERMAN)


def test_the_report_finds_each_kind_within_ten_percent_and_the_filters_remove_them():
    rows, truth = corrupt(PAIRS, share=0.2, seed=0, other_language=GERMAN)
    numbered_rows = numbered(rows)
    builder = ReportBuilder("en", "fr")
    for row in numbered_rows:
        builder.add(*row)
    for row in numbered_rows:
        builder.rescan(*row)
    problems = builder.result()["problems"]
    found = {
        "duplicates": problems["duplicates"]["count"],
        "copies": problems["copies"]["count"],
        "wrong_language": problems["wrong_language_target"]["estimated"],
        "shuffled": problems["misaligned"]["count"],
    }
    for kind, count in found.items():
        assert abs(count - truth[kind]) <= 0.1 * truth[kind], (kind, count, truth[kind])
    rules = FilterRules(deduplicate=True, drop_copies=True, drop_wrong_language=True, drop_misaligned=True)
    kept, counts = apply_filters(numbered_rows, rules, "en", "fr", alignment=builder.alignment())
    kept_rows = list(kept)  # the counts are final once the rows are read
    clean = set(PAIRS)
    assert counts.removed == {
        "duplicates": found["duplicates"],
        "copies": found["copies"],
        "wrong_language": problems["wrong_language_target"]["count"],
        "misaligned": found["shuffled"],
    }
    assert sum((s, t) not in clean for _, s, t in kept_rows) <= 0.1 * truth["shuffled"]  # little corruption is left
