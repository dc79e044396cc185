"""model/data/segments.py: documents split into sentences and joined back with their spacing and lines intact."""

from __future__ import annotations

import pytest

from model.data.segments import (
    Segment,
    join_document,
    join_pieces,
    one_line,
    pieces_that_fit,
    sentences,
    split_document,
    split_line,
)


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


def test_a_translation_with_line_breaks_is_made_one_line():
    assert one_line("eins zwei") == "eins zwei"  # unchanged without a break
    assert one_line(" eins\nzwei ") == "eins zwei"
    assert one_line("eins \r\n\n  zwei\u2028drei\rvier\x85fünf\n") == "eins zwei drei vier fünf"
    assert one_line("\n") == ""


def _words_fit(most: int):
    """fits() of a model that takes `most` tokens (with </s>) when a token is a word."""
    return lambda text: len(text.split()) + 1 <= most


def test_a_sentence_too_long_is_cut_at_whitespace_into_pieces_that_fit():
    fits = _words_fit(4)  # three words a piece
    assert pieces_that_fit("one two three", fits) == ["one two three"]  # fits whole: as it is
    text = "one  two three\tfour five six seven"
    pieces = pieces_that_fit(text, fits)
    assert pieces == ["one two three", "four five six", "seven"]
    assert all(fits(p) for p in pieces) and " ".join(pieces) == " ".join(text.split())


def test_a_word_too_long_is_cut_between_characters_and_an_unfittable_character_stands_alone():
    def fits(text: str) -> bool:  # a token per character, four with </s>
        return len(text) + 1 <= 4

    assert pieces_that_fit("ab abcdefgh c", fits) == ["ab", "abc", "def", "gh", "c"]
    assert pieces_that_fit("你好世界再见", fits) == ["你好世", "界再见"]  # no whitespace to cut at
    assert pieces_that_fit("x y", lambda text: False) == ["x", "y"]  # nothing fits: one character a piece


def test_cutting_a_long_text_asks_fits_about_logarithmically_many_candidates():
    asked: list[str] = []

    def fits(text: str) -> bool:
        asked.append(text)
        return len(text.split()) + 1 <= 101

    text = " ".join(f"w{i}" for i in range(10_000))
    pieces = pieces_that_fit(text, fits)
    assert len(pieces) == 100 and all(len(p.split()) == 100 for p in pieces)
    assert " ".join(pieces) == text and len(asked) < 100 * 20


def test_pieces_translations_are_joined_back_per_sentence():
    assert join_pieces(["a", "b", "c", "d"], [1, 2, 1]) == ["a", "b c", "d"]
    with pytest.raises(ValueError, match="3 translations for 4 pieces"):
        join_pieces(["a", "b", "c"], [1, 2, 1])


def test_a_document_with_a_long_sentence_and_multiline_translations_keeps_its_lines():
    """What a file translation does: long sentences cut to fit, each piece translated (here into two lines),
    made one line, joined back: the result has exactly the source's lines."""
    text = "Short one. " + " ".join(["word"] * 12) + ".\n\nlast line\r\n"
    document = split_document(text)
    fits = _words_fit(6)
    split = [pieces_that_fit(s, fits) for s in sentences(document)]
    assert [len(pieces) for pieces in split] == [1, 3, 1]
    translated = [one_line(f"{p.upper()}\n(continued)") for pieces in split for p in pieces]
    result = join_document(document, join_pieces(translated, [len(pieces) for pieces in split]))
    assert result.count("\n") == text.count("\n") and len(result.split("\n")) == len(text.split("\n"))
    first, blank, last, end = result.split("\n")
    assert first.startswith("SHORT ONE. (continued) WORD WORD WORD WORD WORD (continued) WORD")
    assert (blank, last, end) == ("", "LAST LINE (continued)\r", "")
