import json
import subprocess
import sys

import pytest

from model.data.corpus import (
    DataError,
    dataset_stats,
    parse_monolingual_bytes,
    parse_parallel_bytes,
    read_monolingual,
    read_parallel,
)

PAIRS = [("the cat sat", "die Katze saß"), ("green apples", "grüne Äpfel")]


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def test_jsonl_parses():
    data = _jsonl([{"source": s, "target": t} for s, t in PAIRS])
    assert parse_parallel_bytes(data) == PAIRS
    assert parse_parallel_bytes(data, "jsonl") == PAIRS


def test_tsv_parses():
    data = "".join(f"{s}\t{t}\n" for s, t in PAIRS).encode("utf-8")
    assert parse_parallel_bytes(data) == PAIRS
    assert parse_parallel_bytes(data, "tsv") == PAIRS


def test_blank_lines_crlf_bom_and_extra_fields_are_tolerated():
    data = (
        "\ufeff" + '{"source": " the cat sat ", "target": "die Katze saß", "id": 7}\r\n\r\n  \n'
        '{"source": "green apples", "target": "grüne Äpfel"}'
    ).encode("utf-8")
    assert parse_parallel_bytes(data) == PAIRS
    assert parse_monolingual_bytes(b"one\r\n\r\n  two  \n\n") == ["one", "two"]


def test_read_parallel_uses_the_suffix_then_sniffs(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(_jsonl([{"source": s, "target": t} for s, t in PAIRS]))
    (tmp_path / "a.tsv").write_text("{x\ty\n", encoding="utf-8")  # starts with "{" but the suffix says TSV
    (tmp_path / "a.txt").write_text("a\tb\n", encoding="utf-8")
    assert read_parallel(tmp_path / "a.jsonl") == PAIRS
    assert read_parallel(tmp_path / "a.tsv") == [("{x", "y")]
    assert read_parallel(tmp_path / "a.txt") == [("a", "b")]


def test_read_monolingual(tmp_path):
    path = tmp_path / "mono.txt"
    path.write_text("Größe zählt.\n\nthe end\n", encoding="utf-8")
    assert read_monolingual(path) == ["Größe zählt.", "the end"]


GOOD = '{"source": "a", "target": "b"}\n'


@pytest.mark.parametrize(
    "data, fmt, line, problem",
    [
        (GOOD + '{"source": "a", "target": \n', "auto", 2, "invalid JSON"),
        (GOOD + GOOD + '{"source": "a"}\n', "auto", 3, 'missing field "target"'),
        (GOOD + '{"target": "b"}\n', "auto", 2, 'missing field "source"'),
        (GOOD + '{"source": "  ", "target": "b"}\n', "auto", 2, "empty source"),
        (GOOD + '{"source": "a", "target": ""}\n', "auto", 2, "empty target"),
        (GOOD + '{"source": 3, "target": "b"}\n', "auto", 2, 'field "source" must be a string'),
        (GOOD + '["a", "b"]\n', "auto", 2, "JSON object"),
        ("a\tb\n\nc\td\te\n", "auto", 3, "expected 2 tab-separated columns"),
        ("a\tb\nno tab here\n", "auto", 2, "got 1"),
        ("a\tb\n\tb\n", "auto", 2, "empty source"),
        ("a\tb\nx\t \n", "tsv", 2, "empty target"),
        ("a\tb\n", "jsonl", 1, "invalid JSON"),
    ],
)
def test_bad_parallel_rows_raise_data_error_naming_the_line(data, fmt, line, problem):
    with pytest.raises(DataError) as info:
        parse_parallel_bytes(data.encode("utf-8"), fmt)
    assert info.value.line == line
    assert str(info.value).startswith(f"line {line}: ")
    assert problem in str(info.value)
    assert isinstance(info.value, ValueError)


def test_non_utf8_raises_data_error_naming_the_line():
    data = b"ok\tgut\n" + "bad\tschön\n".encode("latin-1")
    with pytest.raises(DataError, match=r"^line 2: not valid UTF-8") as info:
        parse_parallel_bytes(data)
    assert info.value.line == 2
    with pytest.raises(DataError, match=r"^line 3: not valid UTF-8"):
        parse_monolingual_bytes(b"a\nb\n\xff\n")


def test_bad_file_raises_through_the_file_readers(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(GOOD + '{"source": "a"}\n', encoding="utf-8")
    with pytest.raises(DataError, match='^line 2: missing field "target"'):
        read_parallel(path)


@pytest.mark.parametrize("data", [b"", b"\n  \n"])
def test_empty_files_are_refused(data):
    with pytest.raises(DataError, match="no rows"):
        parse_parallel_bytes(data)
    with pytest.raises(DataError, match="no rows"):
        parse_monolingual_bytes(data)


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="fmt="):
        parse_parallel_bytes(b"a\tb\n", "csv")  # type: ignore[arg-type]


def test_dataset_stats_for_pairs_and_sentences():
    stats = dataset_stats([("ab", "wxyz"), ("abcd", "wx")])
    assert stats == {
        "rows": 2,
        "characters": 12,
        "source": {"characters": 6, "min": 2, "mean": 3.0, "max": 4},
        "target": {"characters": 6, "min": 2, "mean": 3.0, "max": 4},
    }
    assert dataset_stats(["Größe", "a"]) == {
        "rows": 2,
        "characters": 6,
        "text": {"characters": 6, "min": 1, "mean": 3.0, "max": 5},
    }
    assert dataset_stats([]) == {"rows": 0, "characters": 0}


def test_data_module_imports_without_torch_or_tokenizers():
    code = (
        "import sys, model.data.corpus; bad = {'torch', 'tokenizers', 'numpy'} & set(sys.modules); assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
