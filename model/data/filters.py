"""Cleaning a parallel corpus by rules: each rule removes the rows with one problem of the data report.

    rules = FilterRules(drop_empty=True, deduplicate=True, max_ratio=3.0, drop_wrong_language=True)
    kept, counts = apply_filters(rows, rules, "en", "fr")
    for line, source, target in kept: ...      # streaming: rows are read in chunks of CHUNK
    counts.as_dict()                            # final once `kept` is exhausted

Rules are applied in RULE_ORDER (cheap before expensive, so identification and scoring see fewer rows), and each
removed row is counted under the first rule that removed it:

    empty                   drop_empty: a blank side
    invalid_characters      drop_invalid_characters: model/data/problems.py's definition
    length                  min_length / max_length: words (whitespace-separated tokens) on each side, inclusive
                            bounds; OpusFilter's LengthFilter
    ratio_outliers          max_ratio: the longer side at least max_ratio times the shorter in characters, the
                            longer having RATIO_MIN_CHARS or more; OpusFilter's LengthRatioFilter scores it
    duplicates              deduplicate: keeps the first copy of each row (OpusFilter's segment hash)
    copies                  drop_copies: target = source once normalised
    placeholder_mismatches  drop_placeholder_mismatches
    wrong_language          drop_wrong_language: a side in another language than declared (language_odds and
                            language_min_chars: the rule of model/data/language.py); needs a declared language
    misaligned              drop_misaligned: a pair scoring below the threshold of a LexicalAssociations model
                            (pass `alignment=`: ReportBuilder.alignment() or fit_alignment(rows))

The detectors are the report's own (model/data/problems.py, language.py, alignment.py), so on a corpus whose only
problem is one of these, its rule removes exactly the rows the report counted. Where OpusFilter has the filter
(length, ratio, duplicate hashing) its classes are instantiated once and called on chunks of pairs; placeholders,
invalid characters, copies and languages are hand-written (OpusFilter has no placeholder or character filter, its
copy filter measures edit distance, and its py3langid filters fail with py3langid 0.4.0: see language.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from model.data.alignment import LexicalAssociations
from model.data.hashtable import HashTable64
from model.data.language import MIN_CHARS, ODDS, LanguageCheck, known_languages, language_code
from model.data.problems import (
    RATIO_MIN_CHARS,
    invalid_characters,
    is_blank,
    is_copy,
    placeholder_mismatch,
    row_hash,
)

RULE_ORDER = (
    "empty",
    "invalid_characters",
    "length",
    "ratio_outliers",
    "duplicates",
    "copies",
    "placeholder_mismatches",
    "wrong_language",
    "misaligned",
)
CHUNK = 1000
Row = tuple[int, str, str]


@dataclass(frozen=True)
class FilterRules:
    """Which rows to remove; every rule is off by default. See the module docstring for each rule."""

    drop_empty: bool = False
    drop_invalid_characters: bool = False
    min_length: int | None = None  # words, each side
    max_length: int | None = None  # words, each side
    max_ratio: float | None = None  # longer / shorter side in characters
    deduplicate: bool = False
    drop_copies: bool = False
    drop_placeholder_mismatches: bool = False
    drop_wrong_language: bool = False
    language_odds: float = ODDS
    language_min_chars: int = MIN_CHARS
    drop_misaligned: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool" and not isinstance(value, bool):
                raise ValueError(f"{f.name}={value!r} must be true or false")
        for name in ("min_length", "max_length", "language_min_chars"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{name}={value!r} must be a whole number of 0 or more")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length={self.max_length} must be at least 1")
        if self.min_length is not None and self.max_length is not None and self.min_length > self.max_length:
            raise ValueError(f"min_length={self.min_length} is greater than max_length={self.max_length}")
        if self.language_min_chars < 1:
            raise ValueError(f"language_min_chars={self.language_min_chars} must be at least 1")
        for name in ("max_ratio", "language_odds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not value > 1):
                raise ValueError(f"{name}={value!r} must be a number greater than 1")
        if self.max_ratio is not None and math.isinf(self.max_ratio):
            raise ValueError(f"max_ratio={self.max_ratio} must be finite (leave it None for no bound)")

    def active(self) -> tuple[str, ...]:
        """The rules that are on, in the order they apply."""
        on = {
            "empty": self.drop_empty,
            "invalid_characters": self.drop_invalid_characters,
            "length": self.min_length is not None or self.max_length is not None,
            "ratio_outliers": self.max_ratio is not None,
            "duplicates": self.deduplicate,
            "copies": self.drop_copies,
            "placeholder_mismatches": self.drop_placeholder_mismatches,
            "wrong_language": self.drop_wrong_language,
            "misaligned": self.drop_misaligned,
        }
        return tuple(name for name in RULE_ORDER if on[name])


@dataclass
class FilterCounts:
    """Rows read, kept, and removed by each active rule (the first that removed them); final once the kept rows'
    iterator is exhausted."""

    rules: tuple[str, ...]
    total: int = 0
    kept: int = 0
    removed: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, "kept": self.kept, "removed": {r: self.removed.get(r, 0) for r in self.rules}}


Decide = Callable[[list[Row]], list[bool]]  # True: keep


def _declared_codes(rules: FilterRules, source_lang: str | None, target_lang: str | None) -> list[str | None]:
    """The language of each side to check, validated (None: that side is not checked)."""
    codes: list[str | None] = []
    for name, declared in (("source_lang", source_lang), ("target_lang", target_lang)):
        if declared is None:
            codes.append(None)
            continue
        code = language_code(declared)
        if code not in known_languages():
            raise ValueError(f"{name}={declared!r}: py3langid does not know {code!r}, so drop_wrong_language cannot")
        codes.append(code)
    if not any(codes):
        raise ValueError("drop_wrong_language needs a declared language: source_lang and target_lang are both None")
    return codes


def _deciders(
    rules: FilterRules, source_lang: str | None, target_lang: str | None, alignment: LexicalAssociations | None
) -> dict[str, Decide]:
    """One function per active rule, built once (OpusFilter's filters instantiated here, not per chunk)."""
    out: dict[str, Decide] = {}
    active = rules.active()
    if "empty" in active:
        out["empty"] = lambda rows: [not is_blank(s) and not is_blank(t) for _, s, t in rows]
    if "invalid_characters" in active:
        out["invalid_characters"] = lambda rows: [
            not invalid_characters(s) and not invalid_characters(t) for _, s, t in rows
        ]
    # OpusFilter is the worker's: imported where a rule that needs it is built, not with this module, so a host
    # without it (a GPU host's image, bench/gpu_wheels.sh) starts.
    if "length" in active:
        from opusfilter.filters import LengthFilter

        lengths = LengthFilter(
            min_length=rules.min_length or 0,
            max_length=math.inf if rules.max_length is None else rules.max_length,
            unit="word",
        )
        out["length"] = lambda rows: [lengths.accept(x) for x in lengths.score([(s, t) for _, s, t in rows])]
    if "ratio_outliers" in active:
        from opusfilter.filters import LengthRatioFilter

        ratios = LengthRatioFilter(threshold=rules.max_ratio, unit="char")

        def ratio_ok(rows: list[Row]) -> list[bool]:
            scores = ratios.score([(s, t) for _, s, t in rows])
            # OpusFilter also rejects a pair with one empty side (ratio inf) and short pairs: the report's outliers
            # need both sides and RATIO_MIN_CHARS on the longer (empty sides are the empty rule's)
            return [
                ratios.accept(x) or not (min(len(s), len(t)) > 0 and max(len(s), len(t)) >= RATIO_MIN_CHARS)
                for x, (_, s, t) in zip(scores, rows)
            ]

        out["ratio_outliers"] = ratio_ok
    if "duplicates" in active:
        seen = HashTable64()
        out["duplicates"] = lambda rows: [seen.insert(row_hash(s, t)) is None for _, s, t in rows]
    if "copies" in active:
        out["copies"] = lambda rows: [not is_copy(s, t) for _, s, t in rows]
    if "placeholder_mismatches" in active:
        out["placeholder_mismatches"] = lambda rows: [placeholder_mismatch(s, t) is None for _, s, t in rows]
    if "wrong_language" in active:
        check = LanguageCheck(rules.language_min_chars, rules.language_odds)
        codes = _declared_codes(rules, source_lang, target_lang)

        def language_ok(rows: list[Row]) -> list[bool]:
            return [not any(_wrong(check, text, code) for text, code in zip((s, t), codes)) for _, s, t in rows]

        out["wrong_language"] = language_ok
    if "misaligned" in active:
        if alignment is None:
            raise ValueError(
                "drop_misaligned needs alignment=: a LexicalAssociations model from ReportBuilder.alignment() "
                "or fit_alignment(rows)"
            )
        model = alignment
        out["misaligned"] = lambda rows: [not model.is_misaligned(s, t)[0] for _, s, t in rows]
    return out


def _wrong(check: LanguageCheck, text: str, code: str | None) -> bool:
    if code is None:
        return False
    found = check.identify(text, code)
    return found is not None and found.wrong


def apply_filters(
    rows: Iterable[Row],
    rules: FilterRules,
    source_lang: str | None = None,
    target_lang: str | None = None,
    *,
    alignment: LexicalAssociations | None = None,
    chunk: int = CHUNK,
) -> tuple[Iterator[Row], FilterCounts]:
    """The rows `rules` keep (in order, streaming) and the counts, filled while the rows are consumed.

    Settings are checked here, before any row is read: a rule that cannot run raises ValueError naming why."""
    if chunk < 1:
        raise ValueError(f"chunk={chunk} must be at least 1")
    deciders = _deciders(rules, source_lang, target_lang, alignment)
    counts = FilterCounts(rules.active(), removed={name: 0 for name in rules.active()})

    def kept() -> Iterator[Row]:
        batch: list[Row] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= chunk:
                yield from _filter_chunk(batch, deciders, counts)
                batch = []
        if batch:
            yield from _filter_chunk(batch, deciders, counts)

    return kept(), counts


def _filter_chunk(batch: list[Row], deciders: dict[str, Decide], counts: FilterCounts) -> list[Row]:
    counts.total += len(batch)
    for name, decide in deciders.items():
        if not batch:
            break
        keep = decide(batch)
        survivors = [row for row, ok in zip(batch, keep) if ok]
        counts.removed[name] += len(batch) - len(survivors)
        batch = survivors
    counts.kept += len(batch)
    return batch
