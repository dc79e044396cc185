"""A document as lines of sentences, and back: what a file translation translates and how it is reassembled.

Lines are split on "\\n" only, so blank lines, line order and "\\r\\n" endings come back as they were. A line is
cut into sentences by sentencex (Wikimedia's segmenter, rules for ~300 languages, e.g. "Dr." does not end a
sentence), whose pieces concatenate to the line exactly; each keeps the whitespace around it, so a translated
line has the original spacing between its sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
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
