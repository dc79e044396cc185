"""The data report (model/data/report.py): what it counts, in what shape, in bounded memory."""

import json
import random
import subprocess
import sys
import tracemalloc

import pytest

from model.data.report import ReportBuilder, build_report
from tests.model.corpus_fixture import ADJECTIVES, GERMAN, NOUNS, lexicon_pairs, numbered

BASE = lexicon_pairs(200)


def _report(extra: list[tuple[str, str]], **kwargs) -> dict:
    return build_report(numbered(BASE + extra), "en", "fr", **kwargs)


def test_a_clean_corpus_has_no_problems_and_the_documented_shape():
    report = _report([])
    json.dumps(report)  # JSON-serialisable as it is
    assert report["version"] == 1 and report["kind"] == "parallel" and report["rows"] == 200
    assert report["languages"] == {"source": "en", "target": "fr"}
    assert set(report["sides"]) == {"source", "target"} and "words" in report["units"]
    assert {p: v["count"] for p, v in report["problems"].items() if v["count"]} == {}
    assert list(report["problems"]) == [
        "empty",
        "invalid_characters",
        "ratio_outliers",
        "duplicates",
        "duplicate_sources",
        "copies",
        "placeholder_mismatches",
        "number_mismatches",
        "wrong_language_source",
        "wrong_language_target",
        "misaligned",
    ]
    target = report["sides"]["target"]
    assert target["language"]["detected"][0]["language"] == "fr" and target["language"]["known"]
    assert target["language"]["identified"] + target["language"]["skipped_short"] == 200
    for problem in report["problems"].values():
        assert set(problem) >= {"count", "checked", "share", "sampled", "estimated", "examples"}


def test_lengths_are_counted_in_characters_and_whitespace_words():
    report = build_report([(1, "a bc", "xyz"), (2, "de f g", "uvw t")], None, None)
    source = report["sides"]["source"]
    assert source["characters"]["total"] == 10 and source["characters"]["max"] == 6
    assert source["words"]["total"] == 5 and source["words"]["percentiles"]["p50"] == 2
    assert report["length_ratio"]["pairs"] == 2
    assert report["length_ratio"]["percentiles"]["p50"] == pytest.approx(0.75, rel=0.023)
    assert report["sides"]["source"]["language"]["declared"] is None


@pytest.mark.parametrize(
    ("problem", "rows", "detail"),
    [
        ("empty", [("Open the file", "   ")], {}),
        ("invalid_characters", [("Open\u200b the file", "Ouvrir le fichier")], {"characters": ["U+200B"]}),
        ("ratio_outliers", [("Quit", "Quitter l'application maintenant")], {"ratio": 8.0}),
        ("copies", [("Open the file now", "open the FILE now")], {}),
        ("placeholder_mismatches", [("Delete %s?", "Supprimer ?")], {"source_only": ["%s"], "target_only": []}),
        ("number_mismatches", [("Page 10 of 12", "Page 10 sur 13")], {"source_only": ["12"], "target_only": ["13"]}),
        ("wrong_language_target", [("The train is late", GERMAN[0])], {"detected": "de"}),
    ],
)
def test_each_problem_is_counted_with_its_line_and_detail(problem, rows, detail):
    report = _report(rows)
    found = report["problems"][problem]
    assert found["count"] == 1, found
    example = found["examples"][0]
    assert example["line"] == 201 and (example["source"], example["target"]) == rows[0]
    assert {k: example[k] for k in detail} == detail


def test_duplicates_count_extra_copies_and_ambiguous_sources_count_other_targets():
    rows = [("same source", "first"), ("same source", "second"), ("same source", "first"), ("same source", "third")]
    problems = _report(rows)["problems"]
    assert problems["duplicates"]["count"] == 1 and problems["duplicates"]["examples"][0]["line"] == 203
    assert problems["duplicate_sources"]["count"] == 2  # "second" and "third"; the repeated "first" is a duplicate
    assert [e["line"] for e in problems["duplicate_sources"]["examples"]] == [202, 204]


def test_examples_are_few_and_cut():
    rows = [("", f"target {i}") for i in range(10)] + [("x" * 500, "")]
    empty = _report(rows, examples=3)["problems"]["empty"]
    assert empty["count"] == 11 and len(empty["examples"]) == 3
    long = _report([("x" * 500, "")])["problems"]["empty"]["examples"][0]["source"]
    assert len(long) == 200 and long.endswith("…")


def _shuffled(pairs: list[tuple[str, str]], n: int, seed: int = 0) -> tuple[list[tuple[str, str]], set[int]]:
    moved = random.Random(seed).sample(range(len(pairs)), n)
    out = list(pairs)
    for i, j in zip(moved, moved[1:] + moved[:1]):
        out[i] = (pairs[i][0], pairs[j][1])
    return out, {i + 1 for i in moved}


def test_misaligned_pairs_are_found_in_a_second_pass_or_estimated_from_a_sample():
    pairs, moved = _shuffled(lexicon_pairs(600), 30)
    two_passes = build_report(numbered(pairs), "en", "fr")["problems"]["misaligned"]
    assert not two_passes["sampled"] and 27 <= two_passes["count"] <= 33
    assert {e["line"] for e in two_passes["examples"]} <= moved and all(e["score"] < -5 for e in two_passes["examples"])
    builder = ReportBuilder("en", "fr")
    for row in numbered(pairs):
        builder.add(*row)
    one_pass = builder.result()["problems"]["misaligned"]
    assert one_pass["sampled"] and 27 <= one_pass["estimated"] <= 33
    assert builder.result()["problems"]["misaligned"] == one_pass  # the sample is scored once
    assert build_report(iter(numbered(pairs)), "en", "fr")["problems"]["misaligned"] == one_pass  # one-shot rows


def test_misaligned_leaves_copies_and_wrong_languages_to_their_own_problems():
    pairs, _ = _shuffled(lexicon_pairs(600), 30)
    pairs += [(s, s) for s, _ in lexicon_pairs(10, seed=1)] + [(s, g) for (s, _), g in zip(BASE, GERMAN[:10])]
    problems = build_report(numbered(pairs), "en", "fr")["problems"]
    assert problems["copies"]["count"] == 10 and problems["wrong_language_target"]["count"] == 10
    assert 27 <= problems["misaligned"]["count"] <= 33


def test_the_misaligned_estimate_corrects_the_count_for_the_random_pairings_the_threshold_lets_through():
    pairs, _ = _shuffled(lexicon_pairs(600), 30)
    misaligned = build_report(numbered(pairs), "en", "fr")["problems"]["misaligned"]
    assert 0.8 <= misaligned["recall"] <= 1 and misaligned["short_sides"] == 0
    assert misaligned["estimated"] == round(misaligned["count"] / misaligned["recall"])
    assert 29 <= misaligned["estimated"] <= 33


def test_short_wrong_language_targets_are_left_to_the_wrong_language_estimate_not_counted_misaligned_again():
    """Sides under 20 characters are not judged: the wrong-language estimate takes them to be wrong as often as the
    judged ones, so a misaligned pair with a short side counts with the odds that, among the flagged pairs whose
    side was judged, it was its declared language."""
    rng = random.Random(0)
    short = [(f"the {a} {n}", f"le {n_fr} {a_fr}") for n, n_fr in NOUNS for a, a_fr in ADJECTIVES]  # < 20 chars
    pairs = lexicon_pairs(600) + rng.sample(short, 300)
    rng.shuffle(pairs)
    moved = rng.sample(range(len(pairs)), 75)
    corrupted, _ = _shuffled(pairs, 0)
    for i, j in zip(moved[:45], moved[1:45] + moved[:1]):
        corrupted[i] = (pairs[i][0], pairs[j][1])
    long_german, short_german = iter(GERMAN), iter(" ".join(g.split()[:2]) for g in GERMAN)  # "Der Zug"
    for i in moved[45:]:
        corrupted[i] = (pairs[i][0], next(short_german if len(pairs[i][1]) < 20 else long_german))
    problems = build_report(numbered(corrupted), "en", "fr")["problems"]
    misaligned, wrong = problems["misaligned"], problems["wrong_language_target"]
    short_wrong = sum(len(pairs[i][1]) < 20 for i in moved[45:])
    assert short_wrong == 16 and wrong["count"] == 30 - short_wrong  # the long ones; the short ones are estimated
    assert 41 <= misaligned["estimated"] <= 49  # the 45 shuffled pairs, within 10%
    restored = [pairs[i] if i in moved[45:] and len(pairs[i][1]) < 20 else row for i, row in enumerate(corrupted)]
    count = build_report(numbered(restored), "en", "fr")["problems"]["misaligned"]["count"]
    assert misaligned["count"] - count >= 4  # short German targets that fit no source: in the count, not the estimate


def test_languages_are_sampled_beyond_the_cap_every_kth_row():
    builder = ReportBuilder("en", "fr", language_sample=64)
    for line, source, target in numbered(lexicon_pairs(300)[:290] + [(s, g) for (s, _), g in zip(BASE, GERMAN)]):
        builder.add(line, source, target)
    language = builder.result()["sides"]["target"]["language"]
    assert language["sampled"] and language["sample_every"] == 8  # 330 rows: 42 kept after doubling three times
    assert language["identified"] + language["skipped_short"] == len(range(0, 330, 8))
    wrong = builder.result()["problems"]["wrong_language_target"]
    assert wrong["sampled"] and wrong["estimated"] == round(wrong["share"] * 330)


def test_a_monolingual_corpus_reports_its_one_side():
    rows = [(i, text) for i, text in enumerate(["Bonjour tout le monde, comment allez-vous ?", "", GERMAN[1]], 1)]
    report = build_report(rows + [(4, rows[0][1])], "fr", monolingual=True)
    assert report["kind"] == "monolingual" and set(report["sides"]) == {"text"} and "length_ratio" not in report
    assert set(report["problems"]) == {"empty", "invalid_characters", "duplicates", "wrong_language_text"}
    assert report["problems"]["empty"]["examples"] == [{"line": 2, "text": ""}]
    assert report["problems"]["duplicates"]["count"] == 1
    assert report["problems"]["wrong_language_text"]["examples"][0]["line"] == 3


def test_bad_calls_name_the_bad_value():
    with pytest.raises(ValueError, match="examples=-1"):
        ReportBuilder("en", "fr", examples=-1)
    with pytest.raises(ValueError, match="line 7"):
        ReportBuilder("en", "fr").add(7, "only a source")
    with pytest.raises(ValueError, match="target_lang='fr'"):
        ReportBuilder("en", "fr", monolingual=True)
    builder = ReportBuilder("en", "fr")
    for row in numbered(BASE[:3]):
        builder.add(*row)
    builder.rescan(*numbered(BASE)[0])
    with pytest.raises(ValueError, match="rescan saw 1 rows, the first pass 3"):
        builder.result()


def test_memory_stays_bounded_by_the_samples_not_the_corpus():
    """10,000 distinct rows with small samples: what the builder keeps is its hash tables and counters."""
    builder = ReportBuilder("en", "fr", language_sample=100, alignment_sample=100)
    builder.add(0, "warm-up row", "ligne de chauffe")  # loads the language model before measuring
    tracemalloc.start()
    for i in range(1, 10_001):
        builder.add(i, f"row number {i} of the file", f"ligne numéro {i} du fichier")
    kept, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert kept < 700_000  # about 0.4 MB of tables (16K slots); the texts' str objects alone would be 1.5 MB


def test_the_report_and_filters_import_without_torch_or_the_service():
    """The worker's dataset task runs them; so could a torch-free process (they need numpy, py3langid, OpusFilter)."""
    code = (
        "import sys, model.data.report, model.data.filters;"
        "bad = {'torch', 'tokenizers', 'fastapi', 'sqlalchemy', 'celery', 'app', 'worker'}"
        " & {m.split('.')[0] for m in sys.modules}; assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
