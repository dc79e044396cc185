"""Judging a side against its declared language (model/data/language.py), on real sentences."""

import pytest

from model.data.language import LanguageCheck, known_languages, language_code
from tests.model.corpus_fixture import GERMAN

FRENCH = [
    "Impossible d'ouvrir le fichier de configuration.",
    "Voulez-vous enregistrer les modifications avant de quitter ?",
    "Le serveur a mis trop de temps à répondre.",
    "Nous partons en vacances à la montagne la semaine prochaine.",
]


def test_declared_codes_reduce_to_their_language():
    assert [language_code(c) for c in ("fr", "fr-CA", "pt_BR", "sr@latin", " EN ")] == ["fr", "fr", "pt", "sr", "en"]
    assert {"en", "fr", "de", "zh"} <= known_languages()


def test_a_sentence_in_another_language_is_wrong_and_one_in_its_own_is_not():
    check = LanguageCheck()
    for sentence in GERMAN[:10]:
        found = check.identify(sentence, "fr")
        assert found is not None and found.language == "de" and found.wrong, sentence
    for sentence in FRENCH:
        found = check.identify(sentence, "fr")
        assert found is not None and found.language == "fr" and not found.wrong, sentence


def test_without_a_declared_language_nothing_is_wrong_and_short_texts_are_not_judged():
    check = LanguageCheck()
    found = check.identify(GERMAN[0])
    assert found is not None and found.language == "de" and not found.wrong
    assert check.identify("Annuler", "fr") is None  # under 20 characters
    assert LanguageCheck(min_chars=5).identify("Annuler", "fr") is not None


def test_settings_are_checked():
    with pytest.raises(ValueError, match="min_chars=0"):
        LanguageCheck(min_chars=0)
    with pytest.raises(ValueError, match="odds=1"):
        LanguageCheck(odds=1)
