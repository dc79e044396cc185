"""Cleaning rules (model/data/filters.py): each removes what the report counted, in a documented order."""

import random

import pytest

from model.data.filters import RULE_ORDER, FilterRules, apply_filters
from model.data.report import ReportBuilder
from tests.model.corpus_fixture import GERMAN, lexicon_pairs, numbered

BASE = lexicon_pairs(300)


def _shuffle(pairs: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    moved = random.Random(1).sample(range(len(pairs)), n)
    out = list(pairs)
    for i, j in zip(moved, moved[1:] + moved[:1]):
        out[i] = (pairs[i][0], pairs[j][1])
    return out


# Each corpus has one problem only (the lexicon pairs have none): the rule's count must be the report's.
CORPORA = {
    "empty": ("empty", FilterRules(drop_empty=True), BASE + [("Open the file", " ")] * 2 + [("", "Ouvrir")]),
    "invalid_characters": (
        "invalid_characters",
        FilterRules(drop_invalid_characters=True),
        BASE + [(s + "\u200b", t) for s, t in BASE[:4]] + [(s, t + "\x00") for s, t in BASE[4:6]],
    ),
    "ratio_outliers": (
        "ratio_outliers",
        FilterRules(max_ratio=3.0),
        BASE + [("Quit", "Quitter l'application maintenant"), ("the cat sleeps on the old warm chair", "chat")],
    ),
    "duplicates": ("duplicates", FilterRules(deduplicate=True), BASE + BASE[:7] + BASE[:2]),
    "copies": ("copies", FilterRules(drop_copies=True), BASE + [(s, s.upper()) for s, _ in BASE[:5]]),
    "placeholder_mismatches": (
        "placeholder_mismatches",
        FilterRules(drop_placeholder_mismatches=True),
        BASE + [(s + " %s", t) for s, t in BASE[:3]] + [(f"<b>{s}</b>", f"<i>{t}</i>") for s, t in BASE[3:5]],
    ),
    "wrong_language_target": (
        "wrong_language",
        FilterRules(drop_wrong_language=True),
        BASE + [(s, g) for (s, _), g in zip(lexicon_pairs(12, seed=5), GERMAN)],
    ),
    "misaligned": ("misaligned", FilterRules(drop_misaligned=True), _shuffle(BASE, 20)),
}


@pytest.mark.parametrize("problem", list(CORPORA))
def test_a_rule_removes_exactly_what_the_report_counted(problem):
    rule, rules, pairs = CORPORA[problem]
    rows = numbered(pairs)
    builder = ReportBuilder("en", "fr")
    for row in rows:
        builder.add(*row)
    for row in rows:
        builder.rescan(*row)
    report = builder.result()["problems"]
    counted = report[problem]["count"]
    assert counted > 0
    kept, counts = apply_filters(rows, rules, "en", "fr", alignment=builder.alignment())
    kept_rows = list(kept)
    assert counts.as_dict() == {"total": len(rows), "kept": len(rows) - counted, "removed": {rule: counted}}
    assert len(kept_rows) == len(rows) - counted
    example_lines = {e["line"] for e in report[problem]["examples"]}
    assert not example_lines & {line for line, _, _ in kept_rows}  # the rows the report showed are the ones removed


def test_each_row_is_counted_under_the_first_rule_that_removes_it():
    rows = numbered(BASE + [("", "")] + [BASE[0]] + [(BASE[1][0], BASE[1][0])] * 2)
    rules = FilterRules(drop_empty=True, deduplicate=True, drop_copies=True, min_length=4)
    kept, counts = apply_filters(rows, rules, chunk=7)
    lines = [line for line, _, _ in kept]
    # the blank row is empty (not too short); the repeated copy is a duplicate, its first a copy
    assert counts.as_dict()["removed"] == {"empty": 1, "length": 0, "duplicates": 2, "copies": 1}
    assert lines == list(range(1, 301)) and counts.kept == 300 and counts.total == 304


def test_length_bounds_are_inclusive_word_counts():
    rows = [(1, "one", "un"), (2, "one two", "un deux"), (3, "one two three", "un deux trois")]
    kept, counts = apply_filters(rows, FilterRules(min_length=2, max_length=2))
    assert [line for line, _, _ in kept] == [2] and counts.removed == {"length": 2}


def test_filtering_streams_its_rows():
    def rows():
        yield from numbered(BASE)
        raise AssertionError("read past what was asked")

    kept, counts = apply_filters(rows(), FilterRules(deduplicate=True), chunk=10)
    assert [next(kept)[0] for _ in range(5)] == [1, 2, 3, 4, 5] and counts.total == 10
    assert counts.as_dict() == {"total": 10, "kept": 10, "removed": {"duplicates": 0}}


def test_no_rule_keeps_everything():
    kept, counts = apply_filters(numbered(BASE), FilterRules())
    assert len(list(kept)) == 300 and counts.as_dict() == {"total": 300, "kept": 300, "removed": {}}
    assert FilterRules().active() == () and FilterRules(drop_misaligned=True, drop_empty=True).active() == (
        "empty",
        "misaligned",
    )
    assert RULE_ORDER[0] == "empty" and RULE_ORDER[-1] == "misaligned"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_length": -1}, "min_length=-1"),
        ({"max_length": 0}, "max_length=0"),
        ({"min_length": 5, "max_length": 2}, "min_length=5 is greater than max_length=2"),
        ({"max_ratio": 1.0}, "max_ratio=1.0"),
        ({"max_ratio": float("inf")}, "max_ratio=inf"),
        ({"deduplicate": "yes"}, "deduplicate='yes'"),
        ({"language_odds": 0.5}, "language_odds=0.5"),
        ({"language_min_chars": 0}, "language_min_chars=0"),
        ({"min_length": 2.5}, "min_length=2.5"),
    ],
)
def test_bad_rules_name_the_bad_value(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        FilterRules(**settings)


def test_rules_that_cannot_run_say_why_before_reading_a_row():
    with pytest.raises(ValueError, match="drop_misaligned needs alignment="):
        apply_filters(iter(()), FilterRules(drop_misaligned=True))
    with pytest.raises(ValueError, match="both None"):
        apply_filters(iter(()), FilterRules(drop_wrong_language=True))
    with pytest.raises(ValueError, match="target_lang='xx-YY'"):
        apply_filters(iter(()), FilterRules(drop_wrong_language=True), "en", "xx-YY")
    with pytest.raises(ValueError, match="chunk=0"):
        apply_filters(iter(()), FilterRules(), chunk=0)
