"""A model of several pairs draws each epoch's examples anew (prepare's pair_sizes): every pair's rows encoded once,
each epoch as many of each pair as temperature sampling gives it, a large pair's taken on from where the epoch before
stopped, so that over the epochs it trains on all its rows rather than on the same share of them."""

import pytest

from model.data.demo import numbers_to_words_task
from model.data.language_pairs import LanguagePair, held_out_rows, rows_per_pair, tagged_rows
from model.train.config import TrainingError
from model.train.prepare import prepare
from model.train.settings import DataSettings

PAIRS = [LanguagePair("en", "de"), LanguagePair("en", "fr")]


def _prepared(sizes: tuple[int, int], temperature: float = 5.0):
    words = {"de": "Dateien", "fr": "fichiers"}
    rows_by_pair = [[(f"{i} files", f"{i} {words[p.target]}") for i in range(n)] for n, p in zip(sizes, PAIRS)]
    train_rows, valid_by_pair = held_out_rows(rows_by_pair, PAIRS, 0.1, seed=0)
    data = prepare(
        "translation",
        tagged_rows(train_rows, PAIRS),
        [row for part in valid_by_pair for row in part],
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=24),
        target_languages=["de", "fr"],
        pair_sizes=[len(part) for part in train_rows],
        pair_temperature=temperature,
    )
    return data, [len(part) for part in train_rows]


def test_each_epoch_draws_its_share_of_each_pair_and_the_large_one_goes_on_through_its_rows() -> None:
    data, sizes = _prepared((400, 40))
    assert callable(data.train_examples) and data.stats["train_examples"] == sum(sizes)
    counts = rows_per_pair(sizes, 5.0)
    assert counts[0] < sizes[0] and counts[1] > sizes[1]  # the large pair below its size, the small one above
    de, fr = (data.tokenizer.language_tokens[t] for t in ("de", "fr"))
    epochs = [data.train_examples(epoch) for epoch in range(3)]
    for examples in epochs:
        pairs = [int(e.src_ids[0]) for e in examples]
        assert len(examples) == sum(sizes) and (pairs.count(de), pairs.count(fr)) == tuple(counts)
    german = [{(tuple(e.src_ids), tuple(e.tgt_ids)) for e in examples if e.src_ids[0] == de} for examples in epochs]
    assert len(german[0]) == counts[0]  # no row twice in an epoch
    assert len(german[0] | german[1]) == sizes[0]  # the second epoch goes on through the rows the first left
    again, _ = _prepared((400, 40))
    assert [list(e.src_ids) for e in again.train_examples(1)] == [list(e.src_ids) for e in epochs[1]]  # fixed by seed


def test_pair_sizes_must_add_up_to_the_rows() -> None:
    rows = tagged_rows([numbers_to_words_task(20, seed=0), numbers_to_words_task(10, seed=1, lang_tgt="fr")], PAIRS)
    with pytest.raises(TrainingError, match=r"pair sizes \[20, 5\] add up to 25, not the 30 training rows"):
        prepare("translation", rows, rows[:4], preset="tiny", vocab_size=300, target_languages=["de", "fr"],
                pair_sizes=[20, 5])  # fmt: skip
