"""The row-level detectors shared by the data report and the filters (model/data/problems.py)."""

from collections import Counter

import pytest

from model.data.problems import (
    invalid_characters,
    is_copy,
    is_ratio_outlier,
    number_mismatch,
    placeholder_mismatch,
    placeholders,
    row_hash,
    words,
)


def test_a_copy_is_the_source_again_once_stripped_spaced_and_case_folded():
    assert is_copy("Open File", "  open   FILE ")
    assert is_copy("Straße", "STRASSE")  # case-folded, not just lower-cased
    assert not is_copy("Open File", "Ouvrir le fichier")
    assert not is_copy("  ", "  ")  # a blank row is empty, not a copy


def test_invalid_characters_are_named_by_code_point_and_tabs_and_joiners_are_fine():
    assert invalid_characters("plain text, with\ttab and «non-breaking» spaces") == []
    assert invalid_characters("zero\u200bwidth and soft\u00adhyphen") == ["U+200B", "U+00AD"]
    assert invalid_characters("bell\x07 and bidi \u202e override") == ["U+0007", "U+202E"]
    assert invalid_characters("bad decoding: \ufffd, private \ue000, lone \ud800") == ["U+FFFD", "U+E000", "U+D800"]
    assert invalid_characters("می\u200cخواهم 👩\u200d💻") == []  # ZWNJ in Persian, ZWJ in an emoji sequence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%s failed: %d files", ["%d", "%s"]),
        ("%(name)s has %.2f%% left", ["%(name)s", "%.2f"]),  # %% is a literal percent
        ("%2$s before %1$s", ["%s", "%s"]),  # positions dropped: translators reorder with them
        ("Hello {0}, {name}! {} {0:.2f}", ["{0:.2f}", "{0}", "{name}", "{}"]),
        ('<b>bold</b> then <br/> and <a href="x">link</a>', ["</a>", "</b>", "<a>", "<b>", "<br/>"]),
        ("Qt's %1 of %2, ${HOME} and %{count}", ["${HOME}", "%1", "%2", "%{count}"]),
        ("100% of users, 5 < 6 > 4, an email <me@example.com>", []),
    ],
)
def test_placeholders_are_found_in_a_normal_form(text, expected):
    assert sorted(placeholders(text).elements()) == expected


def test_a_placeholder_mismatch_says_what_each_side_has_alone():
    assert placeholder_mismatch("%s of %d", "%d sur %s") is None
    assert placeholder_mismatch("Delete %s?", "Supprimer ?") == (["%s"], [])
    assert placeholder_mismatch("<b>%s</b>", "<i>%s</i>") == (["</b>", "<b>"], ["</i>", "<i>"])
    assert placeholder_mismatch("Hello", "Bonjour") is None


def test_numbers_are_compared_as_sets_outside_placeholders():
    assert number_mismatch("2 files, 2 folders", "2 fichiers et dossiers") is None
    assert number_mismatch("Page 10 of 12", "Page 10 sur 13") == (["12"], ["13"])
    assert number_mismatch("%1$s <h1>", "%s <h2>") is None  # digits inside placeholders are not numbers
    assert number_mismatch("007", "7") is None
    assert number_mismatch("٣ items", "3 éléments") is None  # any script's digits


def test_ratio_outliers_need_a_long_enough_side():
    assert is_ratio_outlier("Quit", "Quitter l'application maintenant")
    assert not is_ratio_outlier("OK", "Valider")  # 3.5 times, but 7 characters say little
    assert not is_ratio_outlier("Open the file", "Ouvrir le fichier")
    assert not is_ratio_outlier("", "anything at all, however long")  # an empty side is the empty problem


def test_row_hashes_tell_rows_apart_and_survive_lone_surrogates():
    assert row_hash("a", "b") == row_hash("a", "b")
    assert row_hash("a", "b") != row_hash("b", "a")
    assert row_hash("a\nb", "c") != row_hash("a", "b\nc")  # OpusFilter escapes the newline it joins with
    assert row_hash("\ud800", "x") != row_hash("\ud801", "x")


def test_words_are_whitespace_separated():
    assert words("  a  b\tc\n") == 3
    assert Counter() == placeholders("")
