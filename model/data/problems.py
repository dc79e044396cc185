"""What can be wrong with one row of a corpus: the detectors that the data report counts and the filters remove by.

One definition each, used by both `model/data/report.py` and `model/data/filters.py`, so a filter removes exactly
the rows the report counted. Hand-written where OpusFilter has no equivalent (placeholders, invalid characters) or
where its filter would compare differently from the report (copies: SimilarityFilter lower-cases but does not
fold case or collapse spaces, and measures an edit distance where equality is all that is asked).

- blank: a side that is empty or whitespace only.
- copy: the target equals the source once both are stripped, their inner whitespace collapsed, and case-folded.
- invalid characters: control characters other than tab (category Cc: NUL, escape, also a newline inside a
  sentence), unpaired surrogates (Cs, only reachable through JSON "\\ud800" escapes), private-use (Co) and
  unassigned (Cn) code points, the replacement character U+FFFD (the trace of a bad decoding), and invisible
  format characters (Cf: zero-width space, soft hyphen, byte-order mark, bidirectional controls) except the
  zero-width joiner and non-joiner (U+200C, U+200D), which Persian, Indic scripts and emoji sequences need.
- placeholders: printf conversions (`%s`, `%d`, `%.2f`, `%(name)s`; positional `%1$s` counts as `%s`, since
  translators reorder with it; `%%` is a literal percent and does not count), Qt's `%1`, `%{name}`, `${name}`,
  brace fields (`{0}`, `{name}`, `{}`, `{0:.2f}`) and markup tags (`<b>`, `</b>`, `<br/>`, attributes dropped:
  `<a href="x">` counts as `<a>`). A mismatch is a row whose two multisets differ.
- numbers: digit runs (any script's digits, leading zeros ignored) outside placeholders; a mismatch is a number
  present on one side only.
- length ratio: the longer side over the shorter in characters (what OpusFilter's LengthRatioFilter scores), an
  outlier when at least RATIO_BOUND and the longer side has RATIO_MIN_CHARS or more (a short UI string such as
  "OK" -> "Valider" is not an outlier: at that length the ratio says little).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opusfilter.segment_hash import SegmentHasher

RATIO_BOUND = 3.0
RATIO_MIN_CHARS = 10
_ALLOWED_FORMAT = frozenset("\u200c\u200d")  # zero-width non-joiner and joiner: needed by several scripts
_BAD_CATEGORIES = frozenset({"Cs", "Co", "Cn"})

_PLACEHOLDER = re.compile(
    r"%%"  # a literal percent sign: matched so that it is skipped
    r"|%(?:\d+\$)?(?:\([^()\s]+\))?[-+#0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|ll|[hlLqjzt])?[diouxXeEfFgGaAcspn]"
    r"|%\d+"  # Qt and KDE: %1, %2
    r"|[%$]\{\w+\}"  # %{name} (Ruby, Rails), ${name} (templates, shells)
    r"|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}"  # str.format / .NET / ICU simple fields
    r"|</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>"  # markup tags
)
_POSITION = re.compile(r"^%\d+\$")
_TAG = re.compile(r"^<(/?)([A-Za-z][\w:.-]*)[^>]*?(/?)>$")
_DIGITS = re.compile(r"\d+")
_PLACEHOLDER_MARK = re.compile(r"[%{<$]")  # a text without any of these has no placeholder: the fast path

# OpusFilter and xxhash (which it brings) are the worker's: imported on the first hash, not with this module, so a
# host without them (a GPU host's image, bench/gpu_wheels.sh) starts; only the data report and the filters hash.


@cache
def _pair_hasher() -> SegmentHasher:
    """OpusFilter's own duplicate hash (xxh64 of the segments joined by a newline, as its RemoveDuplicatesFilter and
    `opusfilter-duplicates` compute it), so that our counts match what OpusFilter's tools would find."""
    from opusfilter.segment_hash import SegmentHasher

    return SegmentHasher(compare="all", method="xxh64")


@cache
def _xxh64() -> Callable[[bytes], int]:
    import xxhash

    digest: Callable[[bytes], int] = xxhash.xxh64_intdigest
    return digest


def row_hash(*sides: str) -> int:
    """64-bit hash of a whole row (both sides of a pair, or the one side of a monolingual row)."""
    hasher = _pair_hasher()
    try:
        hashed: int = hasher.apply(sides)
    except UnicodeEncodeError:  # an unpaired surrogate (from a JSON escape): hash its UTF-8 bytes spelled out
        hashed = hasher.apply(tuple(_spelled(side) for side in sides))
    return hashed


def _spelled(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "backslashreplace")


def text_hash(text: str) -> int:
    """64-bit hash of one side (a source, to find sources that come with more than one target)."""
    return _xxh64()(text.encode("utf-8", "surrogatepass"))


def is_blank(text: str) -> bool:
    return not text.strip()


def normalised(text: str) -> str:
    """Stripped, inner whitespace collapsed to one space, case-folded: what a copy is compared by."""
    return " ".join(text.split()).casefold()


def is_copy(source: str, target: str) -> bool:
    """The target is the source again (not blank; equal once normalised)."""
    return not is_blank(source) and normalised(source) == normalised(target)


def invalid_characters(text: str) -> list[str]:
    """The distinct non-printing or invalid characters of `text`, in order of appearance, as "U+XXXX"."""
    if text.isprintable() and "\ufffd" not in text:  # the fast path: most sentences
        return []
    found: dict[str, None] = {}
    for char in text:
        if char == "\t" or char in _ALLOWED_FORMAT:
            continue
        category = unicodedata.category(char)
        if char == "\ufffd" or category in _BAD_CATEGORIES or category in ("Cc", "Cf"):
            found[f"U+{ord(char):04X}"] = None
    return list(found)


def _placeholder_token(match: str) -> str:
    if match.startswith("<"):
        tag = _TAG.match(match)
        if tag:
            closing, name, self_closing = tag.groups()
            return f"<{closing}{name.lower()}{self_closing}>"
        return match
    if match.startswith("%"):
        return _POSITION.sub("%", match)
    return match


def placeholders(text: str) -> Counter[str]:
    """The multiset of placeholders and tags in `text`, each written in a normal form (see the module docstring)."""
    if not _PLACEHOLDER_MARK.search(text):
        return Counter()
    return Counter(_placeholder_token(m) for m in _PLACEHOLDER.findall(text) if m != "%%")


def _difference(source: Counter[str], target: Counter[str]) -> tuple[list[str], list[str]] | None:
    if source == target:
        return None
    return sorted((source - target).elements()), sorted((target - source).elements())


def placeholder_mismatch(source: str, target: str) -> tuple[list[str], list[str]] | None:
    """None when both sides carry the same placeholders, else (only in the source, only in the target)."""
    return _difference(placeholders(source), placeholders(target))


def numbers(text: str) -> set[str]:
    """The numbers written with digits in `text`, outside placeholders (`%1$s`, `<h1>` hold no number)."""
    if not _DIGITS.search(text):
        return set()
    if _PLACEHOLDER_MARK.search(text):
        text = _PLACEHOLDER.sub(" ", text)
    return {str(int(run)) for run in _DIGITS.findall(text)}


def number_mismatch(source: str, target: str) -> tuple[list[str], list[str]] | None:
    """None when every number of each side appears on the other, else (only in the source, only in the target).

    Compared as sets: "2 files, 2 folders" against "2 fichiers et dossiers" is no mismatch of *numbers*."""
    in_source, in_target = numbers(source), numbers(target)
    if in_source == in_target:
        return None
    return sorted(in_source - in_target), sorted(in_target - in_source)


def length_ratio(source: str, target: str) -> float | None:
    """Target over source in characters; None when a side is empty."""
    return len(target) / len(source) if source and target else None


def is_ratio_outlier(source: str, target: str, bound: float = RATIO_BOUND, min_chars: int = RATIO_MIN_CHARS) -> bool:
    """The longer side is `bound` times the shorter or more (in characters), and at least `min_chars` long."""
    shorter, longer = sorted((len(source), len(target)))
    return shorter > 0 and longer >= min_chars and longer / shorter >= bound


def words(text: str) -> int:
    """Whitespace-separated tokens: the unit of the length statistics and of the length filter."""
    return len(text.split())
