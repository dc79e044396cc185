"""Which language a translate request asks a model for (app/services/target_languages.py): required and checked
for a model of several pairs, flagged zero-shot for a pair it never trained on."""

from __future__ import annotations

import pytest

from app.services.errors import InvalidField
from app.services.target_languages import Target, resolve

PAIRS = [("en", "de"), ("en", "fr"), ("de", "en")]


def test_a_model_of_several_pairs_needs_one_of_its_targets_and_flags_a_pair_it_never_saw() -> None:
    assert resolve("m", PAIRS, ("en", None), "fr", None) == Target("fr", None)
    assert resolve("m", PAIRS, ("en", None), "fr", "en") == Target("fr", False)
    assert resolve("m", PAIRS, ("en", None), "fr", "de") == Target("fr", True)  # de->fr: through English
    assert resolve("m", PAIRS, ("en", None), "en", "de") == Target("en", False)


@pytest.mark.parametrize(
    ("target", "source", "field", "message"),
    [
        (None, None, "target_language", "trained on en->de, en->fr, de->en: give target_language, one of de, en, fr"),
        ("nl", None, "target_language", "it cannot translate into 'nl' (one of de, en, fr)"),
        ("fr", "ja", "source_language", "'ja' is none of its languages"),
        ("fr", "fr", "source_language", "source_language and target_language are both 'fr'"),
    ],
)
def test_what_a_model_of_several_pairs_cannot_serve_is_422_naming_its_pairs(target, source, field, message) -> None:
    with pytest.raises(InvalidField) as refused:
        resolve("m", PAIRS, ("en", None), target, source)
    assert refused.value.field == field and message in refused.value.message


def test_a_model_of_one_pair_takes_its_own_target_or_none() -> None:
    assert resolve("m", [], ("en", "de"), None, None) == Target(None, None)
    assert resolve("m", [], ("en", "de"), "de", "fr") == Target(None, None)  # nothing to tag: one target
    assert resolve("m", [], (None, None), "fr", None) == Target(None, None)  # its languages unknown
    with pytest.raises(InvalidField, match="model m translates into 'de', not 'fr'"):
        resolve("m", [], ("en", "de"), "fr", None)


def test_pairs_into_one_language_need_no_target_language() -> None:
    """de->en and fr->en, or a fine-tune of a model of several pairs on one of them: their one target is tagged."""
    into_english = [("de", "en"), ("fr", "en")]
    assert resolve("m", into_english, (None, "en"), None, None) == Target("en", None)
    assert resolve("m", into_english, (None, "en"), None, "fr") == Target("en", False)
    assert resolve("m", [("en", "fr")], ("en", "fr"), None, None) == Target("fr", None)
    with pytest.raises(InvalidField, match="cannot translate into 'de'"):
        resolve("m", into_english, (None, "en"), "de", None)
