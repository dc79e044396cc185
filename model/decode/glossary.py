"""Glossary terms in a translation: each source term of the glossary found in the source gets its target term in
the translation.

A term the translation already holds is left alone. Otherwise the words the model translated it with are found by
the model's own cross-attention (`align`: each target token's most attended source token; Garg et al. 2019 read
alignments from the same place; the longest run of adjacent ones) and replaced by the target term; where no
target token attends to the term, the
target term goes after the target token aligned with the source just before it (at the start if none is). This
works on any translation, whichever backend made it, and the output always holds every target term; it does not
inflect them (the term is written as the glossary gives it), which constrained decoding would not either.

Source terms are matched whole (not inside a longer word), longest first, case-insensitively unless the glossary is
case-sensitive; a target term counts as there wherever it is in the translation (by the same case rule), a
compound's part included.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from model.data.tokenizer import Tokenizer
from model.decode.queries import align
from model.nn.transformer import Transformer


@dataclass(frozen=True)
class Occurrence:
    start: int  # characters of the source
    end: int
    source: str  # the glossary's source term
    target: str


HOW = ("present", "replaced", "inserted")  # how a term got into a translation


@dataclass(frozen=True)
class Applied:
    source: str
    target: str
    how: str  # "present" (already there), "replaced" (the words aligned with it) or "inserted"


class Glossary:
    """A glossary's terms compiled for matching: one pattern, longest terms first."""

    def __init__(self, entries: Sequence[tuple[str, str]], case_sensitive: bool = False) -> None:
        if not entries:
            raise ValueError("a glossary needs at least one entry")
        self.case_sensitive = case_sensitive
        self._flags = 0 if case_sensitive else re.IGNORECASE
        self._targets = {self._key(s): t for s, t in entries}
        terms = sorted({s for s, _ in entries}, key=len, reverse=True)
        self._pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(t) for t in terms) + r")(?!\w)", self._flags)

    def _key(self, term: str) -> str:
        return term if self.case_sensitive else term.casefold()

    def find(self, text: str) -> list[Occurrence]:
        return [
            Occurrence(m.start(), m.end(), m.group(0), self._targets[self._key(m.group(0))])
            for m in self._pattern.finditer(text)
        ]

    def holds(self, text: str, term: str) -> bool:
        """Whether a translation holds a target term: anywhere, a compound's part included (German's "Dateiname"
        holds "Datei"), as term-use rates count it (Dinu et al., 2019); in any case unless the glossary is
        case-sensitive (a sentence's capitalised first word is the term)."""
        return (term in text) if self.case_sensitive else (term.casefold() in text.casefold())


def apply_glossary(
    model: Transformer, tokenizer: Tokenizer, source: str, translation: str, glossary: Glossary
) -> tuple[str, list[Applied]]:
    """The translation with every target term of the glossary terms found in `source`, and what was done for each
    (in source order)."""
    found = glossary.find(source)
    applied: list[Applied | None] = [None] * len(found)
    pending = []
    for k, o in enumerate(found):
        if glossary.holds(translation, o.target):
            applied[k] = Applied(o.source, o.target, "present")
        else:
            pending.append(k)
    if not pending:
        return translation, [a for a in applied if a is not None]
    limit = model.config.max_positions
    src_ids, src_spans = tokenizer.encode_with_offsets(source)
    tgt_ids, tgt_spans = tokenizer.encode_with_offsets(translation)
    src_ids, src_spans = src_ids[: limit - 1], src_spans[: limit - 1]  # room for </s>
    tgt_ids, tgt_spans = tgt_ids[:limit], tgt_spans[:limit]
    links = align(model, [*src_ids, model.config.eos_id], tgt_ids) if tgt_ids else []
    edits: list[tuple[int, int, str]] = []  # (start, end, text) in the translation
    for k in pending:
        o = found[k]
        inside = {i for i, (a, b) in enumerate(src_spans) if a < o.end and b > o.start}
        run = _longest_run([j for j, s in enumerate(links) if s in inside])
        if run:
            start, end = _trimmed(translation, tgt_spans[run[0]][0], tgt_spans[run[-1]][1])
            edits.append((start, end, o.target))
            applied[k] = Applied(o.source, o.target, "replaced")
        else:
            before = {i for i, (_, b) in enumerate(src_spans) if b <= o.start}
            anchors = [j for j, s in enumerate(links) if s in before]
            at = tgt_spans[max(anchors)][1] if anchors else 0
            edits.append((at, at, o.target))
            applied[k] = Applied(o.source, o.target, "inserted")
    return _edited(translation, edits), [a for a in applied if a is not None]


def _longest_run(indices: list[int]) -> list[int]:
    """The longest stretch of consecutive indices (the first of equals): the words the term was translated with,
    not a stray token elsewhere that also looked at it."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return max(runs, key=len, default=[])


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _edited(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, term) written over its span (an empty span: inserted), overlapping spans merged
    into one that holds their terms in order; spaces collapsed."""
    merged: list[tuple[int, int, str]] = []
    for start, end, term in sorted(edits):
        if merged and start < merged[-1][1]:
            last = merged.pop()
            merged.append((last[0], max(last[1], end), f"{last[2]} {term}"))
        else:
            merged.append((start, end, term))
    out = text
    for start, end, term in reversed(merged):
        left, right = out[:start], out[end:]
        if start == end:  # inserted: a space on each side where words would touch
            term = (" " if left and not left[-1].isspace() else "") + term
            term += " " if right and not right[0].isspace() else ""
        out = left + term + right
    return " ".join(out.split())
