"""Object-store URIs and the prefixes that allow them, compared part by part: scheme, bucket, then each `/`-separated
segment of the key, never as strings.

A prefix `s3://bucket/data` (or `s3://bucket/data/`: the same prefix) allows `s3://bucket/data/x` and a key named
`data` itself, never `s3://bucket/database/x` nor `s3://bucket-other/...`; `s3://bucket` allows the whole bucket and
`s3://` every bucket. A URI or prefix holding what a store or a proxy might read otherwise than we compare it is
refused outright: an empty, `.` or `..` segment, a percent sign (an encoded `/`, `.` or `%`), a backslash, or a
non-printable character (a control character, a space other than ' ').
"""

from __future__ import annotations

import re
from dataclasses import dataclass

S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3 bucket naming rules, simplified
SCHEME = "s3"
FORBIDDEN_SEGMENTS = {"": "an empty segment (//)", ".": "a '.' segment", "..": "a '..' segment"}


@dataclass(frozen=True)
class ObjectPath:
    """A URI or a prefix as its parts; bucket "" (a prefix `s3://` alone): every bucket."""

    bucket: str
    segments: tuple[str, ...]

    def __str__(self) -> str:
        """The canonical text: `s3://`, `s3://bucket/`, `s3://bucket/a/b/` for a prefix."""
        return f"{SCHEME}://" + "".join(f"{part}/" for part in (self.bucket, *self.segments) if part)

    def covers(self, other: ObjectPath) -> bool:
        """Whether `other` (a URI or a narrower prefix) lies under this prefix, segment by segment."""
        if not self.bucket:
            return True
        n = len(self.segments)
        return self.bucket == other.bucket and other.segments[:n] == self.segments

    def overlap(self, other: ObjectPath) -> ObjectPath | None:
        """What both prefixes allow: the narrower one when one lies under the other, else None."""
        if self.covers(other):
            return other
        if other.covers(self):
            return self
        return None


def _unsafe_character(text: str) -> str | None:
    for char in text:
        if char in "%\\" or not char.isprintable():
            return char
    return None


def _split(text: str, what: str) -> tuple[str, list[str]]:
    """(bucket, key segments) of `s3://bucket/key...`; ValueError naming `what` and the bad part."""
    scheme, sep, rest = text.partition("://")
    if scheme != SCHEME or not sep:
        raise ValueError(f"{what} {text!r} is not an s3://bucket/key {'URI' if what == 'uri' else 'prefix'}")
    bad = _unsafe_character(text)
    if bad is not None:
        raise ValueError(
            f"{what} {text!r} holds {bad!r}: percent-encoding, backslashes and non-printable characters are refused"
        )
    bucket, _, key = rest.partition("/")
    if bucket and not S3_BUCKET.fullmatch(bucket):
        raise ValueError(
            f"{what} {text!r} names no valid S3 bucket: {bucket!r} must be 3-63 lowercase letters, digits, dots "
            "or hyphens"
        )
    return bucket, key.split("/") if key else []


def _check_segments(text: str, what: str, segments: list[str]) -> tuple[str, ...]:
    for segment in segments:
        if segment in FORBIDDEN_SEGMENTS:
            raise ValueError(f"{what} {text!r} has {FORBIDDEN_SEGMENTS[segment]}")
    return tuple(segments)


def parse_uri(uri: str) -> ObjectPath:
    """The object `s3://bucket/key` names; ValueError naming the URI and what is wrong with it."""
    bucket, segments = _split(uri, "uri")
    if not bucket or not segments or segments[-1] == "":
        raise ValueError(f"uri {uri!r} is not an s3://bucket/key URI of one object")
    return ObjectPath(bucket, _check_segments(uri, "uri", segments))


def parse_prefix(prefix: str) -> ObjectPath:
    """A prefix: `s3://`, `s3://bucket`, `s3://bucket/some/key/prefix` (a trailing `/` or not, the same);
    ValueError naming it and what is wrong with it."""
    bucket, segments = _split(prefix, "prefix")
    if segments and segments[-1] == "":
        segments.pop()  # s3://bucket/data/ is s3://bucket/data
    if not bucket and (segments or prefix.rstrip("/") != f"{SCHEME}:"):
        raise ValueError(f"prefix {prefix!r} names no bucket")
    return ObjectPath(bucket, _check_segments(prefix, "prefix", segments))


def overlaps(first: list[ObjectPath], second: list[ObjectPath]) -> list[ObjectPath]:
    """What both lists of prefixes allow, as prefixes, without repeats, in canonical text order."""
    found = {shared for a in first for b in second if (shared := a.overlap(b)) is not None}
    return sorted(found, key=str)
