"""An imported archive of a model of several pairs keeps them (its manifest's "pairs"), each checked: a list of
[source, target] language codes whose targets its tokenizer holds tokens for (worker/tasks/model_import.py)."""

from __future__ import annotations

import pytest

from model.data.demo import numbers_to_words_task
from model.data.language_pairs import common_language
from model.data.tokenizer import Tokenizer
from model.io.import_archive import ArchiveError
from worker.tasks.model_import import imported_pairs


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    rows = numbers_to_words_task(100)
    return Tokenizer.train([t for row in rows for t in row], 300).with_language_tokens(["de", "fr"])


def test_the_manifests_pairs_are_kept_when_the_tokenizer_holds_their_targets(tokenizer) -> None:
    assert imported_pairs({}, tokenizer) == []
    assert imported_pairs({"pairs": [["en", "de"], ["en", "fr"]]}, tokenizer) == [["en", "de"], ["en", "fr"]]
    assert (common_language(["en", "en"]), common_language(["de", "fr"]), common_language([])) == ("en", None, None)


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ("en-de", "a list of 1 to 16"),
        ([["en", "de", "fr"]], "each a [source, target] pair"),
        ([["en", 7]], "each a [source, target] pair"),
        ([["en", "de"], ["en", "de"]], "pair en-de is listed twice"),
        ([["en", "not a code"]], "is not a language code"),
        ([["en", "nl"]], "translate into ['nl'], but its tokenizer has no token for them"),
    ],
)
def test_bad_pairs_refuse_the_archive_naming_them(tokenizer, pairs, message) -> None:
    with pytest.raises(ArchiveError, match=message.replace("[", r"\[").replace("]", r"\]")):
        imported_pairs({"pairs": pairs}, tokenizer)
