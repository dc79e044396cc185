"""model/segments.py: documents split into sentences and joined back with their spacing and lines intact."""

from __future__ import annotations

import pytest

from model.segments import Segment, join_document, sentences, split_document, split_line


def test_a_line_keeps_the_whitespace_around_and_between_its_sentences():
    assert split_line("  Hello there.  How are you? I am fine!  ") == [
        Segment("  ", "Hello there.", "  "),
        Segment("", "How are you?", " "),
        Segment("", "I am fine!", "  "),
    ]


def test_abbreviations_and_lines_without_an_end_stay_whole():
    assert [s.text for s in split_line("Dr. Smith went to Washington. Yes")] == [
        "Dr. Smith went to Washington.",
        "Yes",
    ]
    assert [s.text for s in split_line("no end here")] == ["no end here"]


def test_a_document_round_trips_blank_lines_order_and_crlf():
    text = "First line. Second sentence.\n\n   \nÜnïcödé? Ja! 你好。世界。\r\nlast"
    document = split_document(text)
    assert len(document) == 5
    assert join_document(document, sentences(document)) == text  # identity "translation"
    upper = join_document(document, [s.upper() for s in sentences(document)])
    assert upper == "FIRST LINE. SECOND SENTENCE.\n\n   \nÜNÏCÖDÉ? JA! 你好。世界。\r\nLAST"
    assert sentences(document)[:3] == ["First line.", "Second sentence.", "Ünïcödé?"]


def test_a_trailing_newline_stays_and_counts_must_match():
    document = split_document("one\ntwo\n")
    assert sentences(document) == ["one", "two"] and join_document(document, ["eins", "zwei"]) == "eins\nzwei\n"
    for wrong in (["eins", "zwei", "drei"], ["eins"]):
        with pytest.raises(ValueError, match=f"{len(wrong)} translations for 2 sentences"):
            join_document(document, wrong)
