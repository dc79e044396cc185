"""Several pairs in one model: the target-language token, the checks on a job's pairs, temperature sampling and
zero-shot pairs (model/data/language_pairs.py), and the tokenizer's language tokens."""

from __future__ import annotations

from collections import Counter

import pytest

from model.data.language_pairs import (
    LanguagePair,
    check_pairs,
    epoch_indices,
    is_zero_shot,
    multilingual_rows,
    rows_per_pair,
    tag_source,
    tagged_language,
    tagged_rows,
    target_token,
    temperature_shares,
    untagged,
)
from model.data.tokenizer import Tokenizer

EN_DE, EN_FR, EN_NL = LanguagePair("en", "de"), LanguagePair("en", "fr"), LanguagePair("en", "nl")


def test_the_token_names_the_target_and_is_read_back() -> None:
    assert target_token("fr") == ">>fr<<" and target_token("pt-BR") == ">>pt-BR<<"
    assert tag_source("Open the file", "de") == ">>de<< Open the file"
    assert tagged_language(tag_source("Open the file", "zh-Hant")) == "zh-Hant"
    assert tagged_language("Open the file") is None and tagged_language(">>fr<<") == "fr"
    assert tagged_language(">>fr<<Open") is None  # a token is followed by a space or nothing
    assert untagged(">>de<< Open the file") == "Open the file" == untagged("Open the file")
    with pytest.raises(ValueError, match="'French' is not a language code"):
        target_token("French")


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([], "no language pair"),
        ([EN_DE, LanguagePair("en", "Deutsch")], "pair en-Deutsch: target language 'Deutsch'"),
        ([LanguagePair("fr", "fr")], "pair fr-fr: the source and target languages are the same"),
        ([EN_DE, EN_FR, LanguagePair("en", "de")], "pair en-de is listed twice"),
    ],
)
def test_a_bad_list_of_pairs_is_refused_naming_the_problem(pairs: list[LanguagePair], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_pairs(pairs)


def test_check_pairs_takes_a_good_list_and_a_pair_both_ways() -> None:
    check_pairs([EN_DE, LanguagePair("de", "en"), EN_FR])


def test_temperature_one_keeps_the_data_and_a_high_one_evens_the_pairs() -> None:
    sizes = [90_000, 9_000, 1_000]
    assert temperature_shares(sizes, 1) == pytest.approx([0.9, 0.09, 0.01])
    assert temperature_shares(sizes, 1_000) == pytest.approx([1 / 3] * 3, abs=0.01)
    # T = 5 (the default): 0.9 ** 0.2 = 0.979, 0.09 ** 0.2 = 0.618, 0.01 ** 0.2 = 0.398, over their sum 1.995: the
    # smallest pair gets 20 times its share of the rows, the largest about half of them.
    shares = temperature_shares(sizes)
    assert shares == pytest.approx([0.4908, 0.3097, 0.1995], abs=0.0001)
    assert sum(shares) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="temperature=0.5 must be >= 1"):
        temperature_shares(sizes, 0.5)
    with pytest.raises(ValueError, match="every pair needs at least one row"):
        temperature_shares([10, 0])


def test_an_epoch_keeps_its_length_and_gives_every_pair_a_row() -> None:
    sizes = [90_000, 9_000, 1_000]
    counts = rows_per_pair(sizes)
    assert sum(counts) == sum(sizes) and counts == [49_079, 30_966, 19_955]  # 49,078.7, 30,966.6, 19,954.7
    assert rows_per_pair([10_000, 1], 1) == [10_000, 1]  # the data's proportions, none left out
    assert rows_per_pair([5, 5, 5], 3) == [5, 5, 5]


def test_an_epoch_repeats_a_small_pair_whole_and_samples_a_large_one() -> None:
    epoch = epoch_indices([100, 7], [40, 17], seed=3)
    large, small = [j for j in epoch if j < 100], Counter(j - 100 for j in epoch if j >= 100)
    assert len(large) == len(set(large)) == 40  # a sample without repeats
    assert set(small) == set(range(7)) and min(small.values()) >= 2 and sum(small.values()) == 17  # twice, 3 more
    assert epoch == sorted(large) + sorted(j + 100 for j in small.elements())  # pair after pair, sorted in each
    assert epoch_indices([100, 7], [40, 17], seed=3) == epoch
    assert epoch_indices([100, 7], [40, 17], seed=4) != epoch
    with pytest.raises(ValueError, match="2 pairs of rows but 1 counts"):
        epoch_indices([100, 7], [40], seed=3)
    with pytest.raises(ValueError, match="pair 1 has no rows"):
        epoch_indices([100, 0], [40, 1], seed=3)


def test_the_epochs_go_on_through_a_large_pair_so_every_row_comes_once_before_any_twice() -> None:
    """A pair sampled at 40 rows of 100 an epoch: epochs 0-1 and half of 2 are one pass over all its rows (no row
    twice), the rest of epoch 2 starts the next pass; the same subset every epoch would leave 60 rows unseen."""
    epochs = [[j for j in epoch_indices([100, 7], [40, 17], seed=3, epoch=e) if j < 100] for e in range(5)]
    assert all(len(rows) == 40 for rows in epochs)
    first_pass = epochs[0] + epochs[1]
    assert len(set(first_pass)) == 80  # no row twice within a pass
    assert set(first_pass + epochs[2]) == set(range(100))  # the pass ends within epoch 2
    assert set().union(*epochs) == set(range(100)) and len(set(epochs[0]) & set(epochs[1])) == 0
    small = Counter(j for e in range(5) for j in epoch_indices([100, 7], [40, 17], seed=3, epoch=e) if j >= 100)
    assert sorted(small.values()) == [12, 12, 12, 12, 12, 12, 13]  # 85 rows over 7: each within one of the others


def test_tagged_rows_hold_every_pairs_rows_once() -> None:
    german, french = [("one", "eins"), ("two", "zwei")], [("one", "un")]
    assert tagged_rows([german, french], [EN_DE, EN_FR]) == [
        (">>de<< one", "eins"), (">>de<< two", "zwei"), (">>fr<< one", "un"),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="pair en-fr has no rows"):
        tagged_rows([german, []], [EN_DE, EN_FR])


def test_zero_shot_is_a_new_pair_of_languages_the_model_has_read_and_written() -> None:
    trained = [LanguagePair("de", "en"), EN_FR]
    assert is_zero_shot(LanguagePair("de", "fr"), trained) is True
    assert is_zero_shot(EN_FR, trained) is False
    assert is_zero_shot(LanguagePair("nl", "fr"), trained) is None  # never read Dutch
    assert is_zero_shot(LanguagePair("de", "nl"), trained) is None  # never wrote Dutch


def test_the_tokenizer_keeps_each_language_token_whole_and_decode_drops_it() -> None:
    texts = ["Open the file", "Ouvrir le fichier", "Datei öffnen", "Open het bestand"] * 30
    plain = Tokenizer.train(texts, vocab_size=300)
    tokenizer = plain.with_language_tokens(["fr", "de", "nl", "fr"])
    assert tokenizer.vocab_size == plain.vocab_size + 3 and plain.language_tokens == {}
    ids = tokenizer.language_tokens
    assert sorted(ids) == ["de", "fr", "nl"] and min(ids.values()) == plain.vocab_size
    tagged = tokenizer.encode(tag_source("Open the file", "fr"))
    assert tagged == [ids["fr"], *plain.encode("Open the file")]  # the text behind the token encodes as untagged
    assert tokenizer.decode(tagged) == "Open the file"
    again = Tokenizer.from_json_str(tokenizer.to_json_str()).with_language_tokens(["de"])
    assert again.language_tokens == ids and again.vocab_size == tokenizer.vocab_size


def test_the_rows_of_several_pairs_are_tagged_and_balanced() -> None:
    german = [(f"{i} files", f"{i} Dateien") for i in range(90)]
    french = [(f"{i} files", f"{i} fichiers") for i in range(10)]
    rows = multilingual_rows([german, french], [EN_DE, EN_FR], temperature=5, seed=0)
    assert len(rows) == 100
    by_language = Counter(tagged_language(source) for source, _ in rows)
    assert by_language == {"de": 61, "fr": 39}  # shares 0.61 and 0.39: French 3.9 times its 10%
    assert (">>fr<< 3 files", "3 fichiers") in rows  # French whole, 3 times and more
    german_rows = [row for row in rows if row[0].startswith(">>de<<")]
    assert len(set(german_rows)) == 61 and set(german_rows) <= set(tagged_rows([german], [EN_DE]))  # no repeats
    assert all(target.endswith("fichiers") for source, target in rows if source.startswith(">>fr<<"))
    with pytest.raises(ValueError, match="pair en-fr has no rows"):
        multilingual_rows([german, []], [EN_DE, EN_FR])
    with pytest.raises(ValueError, match="pair en-de is listed twice"):
        multilingual_rows([german, german], [EN_DE, EN_DE])


def test_held_out_rows_split_each_pair_before_sampling_and_tag_only_the_validation_rows() -> None:
    from model.data.language_pairs import held_out_rows

    de = [(f"s{i}", f"d{i}") for i in range(40)]
    fr = [(f"s{i}", f"f{i}") for i in range(5)]
    pairs = [LanguagePair("en", "de"), LanguagePair("en", "fr")]
    train, valid = held_out_rows([de, fr], pairs, 0.1, seed=3)
    assert [len(rows) for rows in train] == [36, 4]  # 10% of 40; of 5, at least one
    assert [len(rows) for rows in valid] == [4, 1]
    assert sorted(valid[0]) == sorted((f">>de<< {s}", t) for s, t in de if (s, t) not in train[0])
    assert sorted(valid[1]) == sorted((f">>fr<< {s}", t) for s, t in fr if (s, t) not in train[1])
    held = {(untagged(s), t) for rows in valid for s, t in rows}
    assert not held & {row for rows in train for row in rows}  # no repeats
    assert held_out_rows([de, fr], pairs, 0.1, seed=3) == (train, valid)  # fixed by the seed
    assert held_out_rows([de, fr], pairs, 0.1, seed=4)[1] != valid
    with pytest.raises(ValueError, match="validation needs one and training another"):
        held_out_rows([de, fr[:1]], pairs, 0.1)
