"""Object-store URIs against their prefixes (app/core/object_uris.py): scheme, bucket and key compared segment by
segment, never as strings; a URI or prefix that a store or proxy might read otherwise than we compare it is refused."""

from __future__ import annotations

import pytest

from app.core.object_uris import overlaps, parse_prefix, parse_uri


@pytest.mark.parametrize(
    ("prefix", "uri", "allowed"),
    [
        ("s3://bucket/data", "s3://bucket/data", True),  # the object the prefix names
        ("s3://bucket/data", "s3://bucket/data/x.tsv", True),
        ("s3://bucket/data/", "s3://bucket/data/deeper/x.tsv", True),
        ("s3://bucket/data", "s3://bucket/database", False),  # a string prefix, not a segment one
        ("s3://bucket/data", "s3://bucket/data-2024/x.tsv", False),
        ("s3://bucket/data/", "s3://bucket/datax", False),
        ("s3://bucket", "s3://bucket-other/x.tsv", False),  # another bucket whose name begins the same
        ("s3://bucket", "s3://bucket/x.tsv", True),
        ("s3://bucket/", "s3://bucket/any/key.tsv", True),
        ("s3://bucket/data", "s3://other/data/x.tsv", False),
        ("s3://", "s3://any-bucket/x.tsv", True),  # every bucket: the operator's choice
    ],
)
def test_a_uri_is_under_a_prefix_segment_by_segment(prefix, uri, allowed):
    assert parse_prefix(prefix).covers(parse_uri(uri)) is allowed


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("s3://bucket/data/../private/x.tsv", "has a '..' segment"),
        ("s3://bucket/data/./x.tsv", "has a '.' segment"),
        ("s3://bucket/data//x.tsv", "has an empty segment (//)"),
        ("s3://bucket/data/%2e%2e/private/x.tsv", "holds '%'"),  # an encoded ..
        ("s3://bucket/data%2f..%2fprivate/x.tsv", "holds '%'"),  # an encoded /
        ("s3://bucket/data\\..\\private/x.tsv", "holds '\\\\'"),
        ("s3://bucket/data/\x00x.tsv", "holds '\\x00'"),
        ("s3://bucket/data/x.tsv\n", "holds '\\n'"),
        ("s3://bucket/data/", "not an s3://bucket/key URI of one object"),
        ("s3://bucket", "not an s3://bucket/key URI of one object"),
        ("s3:///data/x.tsv", "not an s3://bucket/key URI of one object"),
        ("s3://Bucket/x.tsv", "names no valid S3 bucket: 'Bucket'"),
        ("S3://bucket/x.tsv", "is not an s3://bucket/key URI"),
        ("https://bucket/x.tsv", "is not an s3://bucket/key URI"),
        ("file:///etc/passwd", "is not an s3://bucket/key URI"),
        ("/etc/passwd", "is not an s3://bucket/key URI"),
    ],
)
def test_a_uri_with_dot_segments_encodings_or_no_object_is_refused_naming_it(uri, says):
    with pytest.raises(ValueError) as refused:
        parse_uri(uri)
    assert says in str(refused.value) and repr(uri) in str(refused.value)


@pytest.mark.parametrize(
    ("prefix", "says"),
    [
        ("s3://bucket/../x", "has a '..' segment"),
        ("s3://bucket/a%2fb", "holds '%'"),
        ("s3:///x", "names no bucket"),
        ("s3://B/x", "names no valid S3 bucket"),
        ("file:///data", "is not an s3://bucket/key prefix"),
        ("/data", "is not an s3://bucket/key prefix"),
    ],
)
def test_a_bad_prefix_is_refused_naming_it(prefix, says):
    with pytest.raises(ValueError) as refused:
        parse_prefix(prefix)
    assert says in str(refused.value) and repr(prefix) in str(refused.value)


def test_a_prefix_reads_the_same_with_or_without_its_trailing_slash():
    assert str(parse_prefix("s3://bucket/data")) == str(parse_prefix("s3://bucket/data/")) == "s3://bucket/data/"
    assert str(parse_prefix("s3://bucket")) == "s3://bucket/" and str(parse_prefix("s3://")) == "s3://"


def test_what_two_lists_both_allow_is_the_narrower_of_each_pair():
    installation = [parse_prefix("s3://shared/"), parse_prefix("s3://wmt/en-de")]
    own = [parse_prefix("s3://shared/acme"), parse_prefix("s3://wmt/"), parse_prefix("s3://private/")]
    assert [str(p) for p in overlaps(installation, own)] == ["s3://shared/acme/", "s3://wmt/en-de/"]
    assert overlaps(installation, []) == []
    assert [str(p) for p in overlaps([parse_prefix("s3://")], own)] == [
        "s3://private/",
        "s3://shared/acme/",
        "s3://wmt/",
    ]
