"""The data report of a corpus: its lengths, languages and problems, built by streaming over its rows.

    builder = ReportBuilder("en", "fr")
    for line, source, target in rows():        # pass 1: everything but the alignment scores
        builder.add(line, source, target)
    for line, source, target in rows():        # pass 2 (optional): every pair's alignment score
        builder.rescan(line, source, target)
    report = builder.result()                  # a JSON-serialisable dict, shape below

or `build_report(rows, "en", "fr")`. Without the second pass, misaligned pairs are estimated from the first pass's
sample (`"sampled": true`). A monolingual corpus: `ReportBuilder("en", None, monolingual=True)` and
`add(line, text)`; its one side is called "text" and only the one-side problems are reported.

Memory is bounded whatever the corpus size: length counts (a few KB), two tables of 64-bit hashes for duplicates
(about 35 bytes a distinct row: 170 MB at 5M pairs; model/data/hashtable.py), the alignment sample (at most 50,000
pairs cut to 300 characters: typically 10 MB, at most 120 MB; about 200 MB more while the model is fitted, see
model/data/alignment.py), the language sample (at most LANGUAGE_SAMPLE rows, 11 bytes each a side) and the examples.
Speed on one core (about 6,000 pairs a second while both sides are identified, 19,000 after, 28,000-55,000 in the
second pass): docs/data.md.

Report (keys always present unless said; "share" is count / checked, rounded to 6 places):

    {"version": 1, "kind": "parallel" | "monolingual", "rows": int,
     "languages": {"source": "en" | None, "target": "fr" | None}       # as declared ("text" when monolingual)
     "units": {"characters": ..., "words": ...}                        # what the lengths count, in words
     "sides": {"source" | "target" | "text": {
         "characters": LENGTHS, "words": LENGTHS,
         "language": {"declared": "en" | None, "known": bool,          # whether py3langid knows the declared code
                      "identified": int, "skipped_short": int,         # sides judged; sides under min_chars
                      "sampled": bool, "sample_every": int,            # every k-th row identified
                      "min_chars": int, "odds": float,                 # the rule of model/data/language.py
                      "detected": [{"language": "fr", "count": int, "share": float}, ...]}}},   # top 10
     "length_ratio": RATIO (parallel only),
     "problems": {NAME: PROBLEM, ...}}

    LENGTHS  = {"total", "min", "max", "mean", "percentiles": {"p1", "p5", "p25", "p50", "p75", "p95", "p99"},
                "histogram": {"edges": [...], "counts": [...], "above": int}}
    RATIO    = {"unit": "characters", "definition": "target/source", "pairs": int, "percentiles": {...},
                "histogram": {"scale": "log2", "edges": [...], "counts": [...], "below": int, "above": int}}
    PROBLEM  = {"count": int, "checked": int, "share": float, "sampled": bool, "estimated": int,
                "examples": [{"line": int, "source": str, "target": str, ...detail}]}   # "text" when monolingual

`estimated` is the count when every row was checked, else round(share * rows): when a sample was checked, and for
the languages, whose short sides are not judged (the share among judged sides is taken for all); for misaligned,
the count corrected for the short sides that the wrong-language estimate already counts and for the threshold's
recall (ReportBuilder._misaligned_estimate, docs/data.md). Texts in
examples are cut to 200 characters. Problems (parallel; monolingual: empty, invalid_characters, duplicates,
wrong_language_text), in the order the filters of model/data/filters.py apply them:

    empty                   a blank side
    invalid_characters      + "characters": ["U+200B", ...]          (definition: model/data/problems.py)
    ratio_outliers          + "ratio": target/source; "bound", "min_characters" beside "count"
    duplicates              rows that repeat an earlier row exactly: what deduplication removes
    duplicate_sources       rows (not exact duplicates) whose source came earlier with another target
    copies                  target = source once stripped, spaces collapsed and case-folded
    placeholder_mismatches  + "source_only", "target_only": placeholders and tags on one side only
    number_mismatches       + "source_only", "target_only": numbers on one side only (report only, no filter)
    wrong_language_source   + "detected", "probability"; copies are not counted here (they are copies)
    wrong_language_target   (same)
    misaligned              + "score"; "unscored", "threshold", "short_sides", "recall" beside "count"; pairs
                            that are empty, copies or in a wrong language are left to those problems, so each row
                            counts once among these four
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import Any

from model.data.alignment import SAMPLE, LexicalAssociations, Reservoir, is_scorable, random_recall
from model.data.distribution import LengthCounts, RatioCounts
from model.data.hashtable import HashTable64
from model.data.language import LanguageCheck
from model.data.language_sample import LANGUAGE_SAMPLE, LanguageSample
from model.data.problems import (
    RATIO_BOUND,
    RATIO_MIN_CHARS,
    invalid_characters,
    is_blank,
    is_copy,
    is_ratio_outlier,
    length_ratio,
    number_mismatch,
    placeholder_mismatch,
    row_hash,
    text_hash,
    words,
)

VERSION = 1
EXAMPLE_CHARS = 200
UNITS = {"characters": "Unicode code points", "words": "whitespace-separated tokens (str.split())"}


def _cut(text: str) -> str:
    return text if len(text) <= EXAMPLE_CHARS else text[: EXAMPLE_CHARS - 1] + "…"


class _Problem:
    """A count and the first few examples of one problem."""

    def __init__(self, examples: int) -> None:
        self.count = 0
        self.examples: list[dict[str, Any]] = []
        self._room = examples

    def hit(self, line: int, texts: dict[str, str], **detail: Any) -> None:
        self.count += 1
        if len(self.examples) < self._room:
            self.examples.append({"line": line, **{k: _cut(v) for k, v in texts.items()}, **detail})

    def as_dict(
        self, checked: int, rows: int, sampled: bool = False, extrapolate: bool = False, **extra: Any
    ) -> dict[str, Any]:
        share = self.count / checked if checked else 0.0
        return {
            "count": self.count,
            "checked": checked,
            "share": round(share, 6),
            "sampled": sampled,
            "estimated": round(share * rows) if sampled or extrapolate else self.count,
            **extra,
            "examples": self.examples,
        }


class ReportBuilder:
    """Builds the report of the module docstring from rows given one at a time (1-based line numbers)."""

    def __init__(
        self,
        source_lang: str | None,
        target_lang: str | None,
        *,
        examples: int = 5,
        monolingual: bool = False,
        language: LanguageCheck | None = None,
        language_sample: int = LANGUAGE_SAMPLE,
        alignment_sample: int = SAMPLE,
    ) -> None:
        if examples < 0:
            raise ValueError(f"examples={examples} must be 0 or more")
        if language_sample < 1:
            raise ValueError(f"language_sample={language_sample} must be at least 1")
        if monolingual and target_lang is not None:
            raise ValueError(f"target_lang={target_lang!r}: a monolingual corpus has one language, the source's")
        self.monolingual = monolingual
        self.rows = 0
        self._examples = examples
        check = language or LanguageCheck()
        self._sides = ("text",) if monolingual else ("source", "target")
        declared = {"text": source_lang} if monolingual else {"source": source_lang, "target": target_lang}
        self._declared = declared
        self._chars = {side: LengthCounts() for side in self._sides}
        self._words = {side: LengthCounts() for side in self._sides}
        self._languages = {side: LanguageSample(declared[side], check, language_sample) for side in self._sides}
        self._ratio = RatioCounts()
        self._seen_rows = HashTable64()
        self._first_target = HashTable64(with_values=True)  # source hash -> low 32 bits of its first target's hash
        self._sample = Reservoir(alignment_sample)
        self._alignment: LexicalAssociations | None = None
        self._rescanned = 0
        self._sample_scored = False
        self._unscored = 0
        self._scored = 0
        self._flagged_judged = Counter[str]()  # pairs below the threshold whose side (the key) was judged
        self._flagged_wrong = Counter[str]()  # ...and judged another language
        self._short_sides = Counter[tuple[str, ...]]()  # misaligned pairs by their sides too short to judge
        self._recall: float | None = None
        names = ["empty", "invalid_characters", "duplicates"]
        if monolingual:
            names.append("wrong_language_text")
        else:
            names[2:2] = ["ratio_outliers"]
            names += ["duplicate_sources", "copies", "placeholder_mismatches", "number_mismatches"]
            names += ["wrong_language_source", "wrong_language_target", "misaligned"]
        self._problems = {name: _Problem(examples) for name in names}

    def _texts(self, source: str, target: str | None) -> dict[str, str]:
        return {"text": source} if target is None else {"source": source, "target": target}

    def add(self, line: int, source: str, target: str | None = None) -> None:
        """First pass: one row (`target` None for a monolingual corpus, a string for a parallel one)."""
        if (target is None) != self.monolingual:
            kind = "monolingual" if self.monolingual else "parallel"
            raise ValueError(f"line {line}: target={target!r} does not fit a {kind} report")
        problems = self._problems
        texts = self._texts(source, target)
        row = self.rows
        self.rows += 1
        for side, text in texts.items():
            self._chars[side].add(len(text))
            self._words[side].add(words(text))
        if any(is_blank(text) for text in texts.values()):
            problems["empty"].hit(line, texts)
        bad = [char for text in texts.values() for char in invalid_characters(text)]
        if bad:
            problems["invalid_characters"].hit(line, texts, characters=list(dict.fromkeys(bad))[:5])
        duplicate = self._seen_rows.insert(row_hash(*texts.values())) is not None
        if duplicate:
            problems["duplicates"].hit(line, texts)
        copy = False
        if target is not None:
            copy = self._pair(line, source, target, texts, duplicate)
        for side, text in texts.items():
            sample = self._languages[side]
            if sample.wants(row):
                found = sample.add(row, text, copy)
                if found is not None and found.wrong:
                    problems[f"wrong_language_{side}"].hit(
                        line, texts, detected=found.language, probability=round(found.probability, 3)
                    )

    def _pair(self, line: int, source: str, target: str, texts: dict[str, str], duplicate: bool) -> bool:
        """The pair-level problems of one row; returns whether it is a copy."""
        problems = self._problems
        ratio = length_ratio(source, target)
        if ratio is not None:
            self._ratio.add(ratio)
            if is_ratio_outlier(source, target):
                problems["ratio_outliers"].hit(line, texts, ratio=round(ratio, 3))
        if not duplicate:
            target_hash = text_hash(target) & 0xFFFFFFFF
            first = self._first_target.insert(text_hash(source), target_hash)
            if first is not None and first != target_hash:
                problems["duplicate_sources"].hit(line, texts)
        copy = is_copy(source, target)
        if copy:
            problems["copies"].hit(line, texts)
        mismatch = placeholder_mismatch(source, target)
        if mismatch:
            problems["placeholder_mismatches"].hit(line, texts, source_only=mismatch[0], target_only=mismatch[1])
        mismatch = number_mismatch(source, target)
        if mismatch:
            problems["number_mismatches"].hit(line, texts, source_only=mismatch[0], target_only=mismatch[1])
        if is_scorable(source, target):
            self._sample.add(line, source, target)
        return copy

    def alignment(self) -> LexicalAssociations:
        """The association model learnt from the first pass's sample (fitted at the first call): what
        apply_filters(..., alignment=) takes to remove the pairs this report counts as misaligned."""
        if self._alignment is None:
            self._alignment = LexicalAssociations.fit((s, t) for _, s, t in self._sample.rows)
        return self._alignment

    def rescan(self, line: int, source: str, target: str) -> None:
        """Second pass (parallel corpora): the same rows again, in the same order, to score each pair's alignment
        against the associations learnt from the first pass's sample (fitted at the first call)."""
        if self.monolingual:
            raise ValueError("a monolingual corpus has no alignment to score: rescan is for parallel corpora")
        if self._sample_scored:
            raise ValueError(f"line {line}: result() already estimated the alignment from the sample; rescan before")
        if self._rescanned >= self.rows:
            raise ValueError(f"line {line}: rescan was given more rows than the first pass's {self.rows}")
        self.alignment()
        self._rescanned += 1
        self._score(line, source, target)

    def _score(self, line: int, source: str, target: str) -> None:
        if not is_scorable(source, target):
            return
        misaligned, score = self.alignment().is_misaligned(source, target)
        if score is None:
            self._unscored += 1
            return
        self._scored += 1
        if not misaligned:
            return
        judged = {side: self._languages[side].judge(text) for side, text in (("source", source), ("target", target))}
        for side, verdict in judged.items():
            if verdict is not None:
                self._flagged_judged[side] += 1
                self._flagged_wrong[side] += verdict
        if any(judged.values()):
            return  # a wrong language explains it; counted there (on the sample, when sampled)
        short = tuple(side for side, verdict in judged.items() if verdict is None and self._languages[side].code)
        self._short_sides[short] += 1
        self._problems["misaligned"].hit(line, {"source": source, "target": target}, score=round(score, 2))

    def _misaligned_estimate(self) -> tuple[float, float | None]:
        """(the misaligned pairs among the scored ones, estimated; the recall it was corrected by), two corrections
        to the count:

        - a side too short for its language to be judged may be in the wrong language, which that problem's
          estimate already counts (it takes short sides to be wrong as often as judged ones): a misaligned pair
          with a short side counts as misaligned with the odds that, among the pairs below the threshold whose
          side was judged, it was in its declared language;
        - the threshold lets some misaligned pairs through: the count is divided by the share of the corpus's own
          random pairings that it flags (alignment.random_recall)."""
        right = {
            side: 1 - self._flagged_wrong[side] / judged if (judged := self._flagged_judged[side]) else 1.0
            for side in ("source", "target")
        }
        misaligned = sum(n * math.prod(right[side] for side in short) for short, n in self._short_sides.items())
        if self._recall is None and len(self._sample.rows) > 1:
            self._recall = random_recall(self.alignment(), [(s, t) for _, s, t in self._sample.rows])
        recall = self._recall
        return min(float(self._scored), misaligned / recall if recall else misaligned), recall

    def result(self) -> dict[str, Any]:
        """The report (see the module docstring), after the passes; calling it again gives the same report."""
        if self._rescanned and self._rescanned != self.rows:
            raise ValueError(f"rescan saw {self._rescanned} rows, the first pass {self.rows}: give it every row")
        sampled_alignment = not self._rescanned and not self.monolingual
        if sampled_alignment and not self._sample_scored:
            self._sample_scored = True  # once: result() may be called again
            for line, source, target in self._sample.rows:
                self._score(line, source, target)
        problems = self._problems
        out: dict[str, Any] = {}
        for name, problem in problems.items():
            if name.startswith("wrong_language_"):
                sample = self._languages[name.removeprefix("wrong_language_")]
                problem.count = sample.wrong_count()  # of the rows the sample kept (examples may be from others)
                out[name] = problem.as_dict(sample.identified(), self.rows, sample.every > 1, extrapolate=True)
            elif name == "misaligned":
                misaligned, recall = self._misaligned_estimate()
                out[name] = problem.as_dict(
                    self._scored,
                    self.rows,
                    sampled_alignment,
                    unscored=self._unscored,
                    threshold=self._threshold(),
                    short_sides=self._short_sides.total() - self._short_sides[()],
                    recall=None if recall is None else round(recall, 4),
                )
                share = misaligned / self._scored if self._scored else 0.0
                out[name]["estimated"] = round(share * self.rows if sampled_alignment else misaligned)
            elif name == "ratio_outliers":
                out[name] = problem.as_dict(self._ratio.n, self.rows, bound=RATIO_BOUND, min_characters=RATIO_MIN_CHARS)
            else:
                out[name] = problem.as_dict(self.rows, self.rows)
        report: dict[str, Any] = {
            "version": VERSION,
            "kind": "monolingual" if self.monolingual else "parallel",
            "rows": self.rows,
            "languages": dict(self._declared),
            "units": UNITS,
            "sides": {
                side: {
                    "characters": self._chars[side].summary(),
                    "words": self._words[side].summary(),
                    "language": self._languages[side].summary(),
                }
                for side in self._sides
            },
        }
        if not self.monolingual:
            report["length_ratio"] = {"unit": "characters", "definition": "target/source", **self._ratio.summary()}
        report["problems"] = out
        return report

    def _threshold(self) -> float | None:
        return self._alignment.threshold if self._alignment is not None else None


Rows = Iterable[tuple[int, str, str]] | Iterable[tuple[int, str]]


def build_report(
    rows: Rows | Callable[[], Rows],
    source_lang: str | None = None,
    target_lang: str | None = None,
    *,
    examples: int = 5,
    monolingual: bool = False,
) -> dict[str, Any]:
    """The report of `rows` ((line, source, target), or (line, text) when monolingual).

    Two passes when `rows` can give them: a function returning a fresh iterable of the rows, or a collection (a
    list); a one-shot iterator gets one pass, and misaligned pairs are then estimated from a sample."""
    builder = ReportBuilder(source_lang, target_lang, examples=examples, monolingual=monolingual)
    first = rows() if callable(rows) else rows
    for row in first:
        builder.add(*row)
    again = callable(rows) or isinstance(rows, Collection)
    if again and not monolingual and builder.rows:
        for row in rows() if callable(rows) else rows:
            line, source, target = row  # type: ignore[misc]
            builder.rescan(line, source, target)
    return builder.result()
