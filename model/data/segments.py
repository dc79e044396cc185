"""A document as lines of sentences, and back: what a file translation translates and how it is reassembled.

Lines are split on "\\n" only, so blank lines, line order and "\\r\\n" endings come back as they were. A line is
cut into sentences by sentencex (Wikimedia's segmenter, rules for ~300 languages, e.g. "Dr." does not end a
sentence), whose pieces concatenate to the line exactly; each keeps the whitespace around it, so a translated
line has the original spacing between its sentences.

A sentence longer than the model takes is cut into pieces that fit (pieces_that_fit: at whitespace where it can,
else between characters), each translated alone and joined with a space (join_pieces); a translation is made one
line (one_line), so the result always has the source's lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sentencex import segment


@dataclass(frozen=True)
class Segment:
    before: str  # whitespace before the sentence
    text: str  # the sentence, to translate; "" for a blank line
    after: str  # whitespace after it (a line's trailing spaces, "\\r")


def split_line(line: str, language: str = "en") -> list[Segment]:
    """The sentences of one line, with the whitespace around each; a blank line is one empty Segment."""
    segments = []
    for piece in segment(language, line):
        core = piece.strip()
        if not core:
            segments.append(Segment(piece, "", ""))
            continue
        start = piece.index(core)
        segments.append(Segment(piece[:start], core, piece[start + len(core) :]))
    return segments or [Segment("", "", "")]


def split_document(text: str, language: str = "en") -> list[list[Segment]]:
    """One list of Segments per line ("\\n"-separated; the text after the last "\\n" is a line, maybe empty)."""
    return [split_line(line, language) for line in text.split("\n")]


def sentences(document: Sequence[Sequence[Segment]]) -> list[str]:
    """The texts to translate, in order (empty ones left out)."""
    return [s.text for line in document for s in line if s.text]


def join_document(document: Sequence[Sequence[Segment]], translations: Sequence[str]) -> str:
    """The document with each sentence replaced by its translation (in the order of sentences())."""
    expected = sum(1 for line in document for s in line if s.text)
    if len(translations) != expected:
        raise ValueError(f"{len(translations)} translations for {expected} sentences")
    answers = iter(translations)
    return "\n".join("".join(s.before + (next(answers) if s.text else "") + s.after for s in line) for line in document)


# Whitespace around any line break str.splitlines() knows ("\n", "\r", "\v", "\f", "\x1c"-"\x1e", "\x85",
# "\u2028", "\u2029").
LINE_BREAK = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")


def one_line(text: str) -> str:
    """text with each line break (and the whitespace around it) made one space: a translation that stays on its
    line."""
    return LINE_BREAK.sub(" ", text).strip() if LINE_BREAK.search(text) else text


def _longest_fitting(parts: Sequence[str], start: int, sep: str, fits: Callable[[str], bool]) -> int:
    """The largest k with fits(sep.join(parts[start : start + k])), found by doubling then bisecting; 1 when
    not even parts[start] fits, so a cut always moves on."""
    left = len(parts) - start
    good, k = 0, 1
    while k <= left and fits(sep.join(parts[start : start + k])):
        good, k = k, k * 2
    bad = min(k, left + 1)
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(sep.join(parts[start : start + middle])) else (good, middle)
    return max(good, 1)


def _cut(parts: Sequence[str], sep: str, fits: Callable[[str], bool]) -> list[str]:
    """parts joined by sep into as few pieces as fit, in order; a part that does not fit alone is a piece."""
    pieces, start = [], 0
    while start < len(parts):
        k = _longest_fitting(parts, start, sep, fits)
        pieces.append(sep.join(parts[start : start + k]))
        start += k
    return pieces


def pieces_that_fit(text: str, fits: Callable[[str], bool]) -> list[str]:
    """text cut into pieces for which fits() is true, in order: at whitespace where it can (the whitespace is
    dropped), a word that does not fit alone between its characters; [text] when it fits whole. A character
    that does not fit alone is a piece of its own (the caller leaves it as it is)."""
    if fits(text):
        return [text]
    return [
        piece
        for group in _cut(text.split(), " ", fits)
        for piece in ([group] if fits(group) else _cut(list(group), "", fits))
    ]


def join_pieces(translations: Sequence[str], sizes: Sequence[int]) -> list[str]:
    """One text per entry of sizes: that many consecutive translations (of one sentence's pieces) joined with a
    space."""
    if len(translations) != sum(sizes):
        raise ValueError(f"{len(translations)} translations for {sum(sizes)} pieces")
    joined: list[str] = []
    start = 0
    for size in sizes:
        joined.append(" ".join(translations[start : start + size]))
        start += size
    return joined
