"""A model of several language pairs is validated pair by pair (model/train/pair_validation.py): each pair's
metrics under "name/pair", their mean under the plain name; the validation examples interleaved by pair so that
the sentences decoded for BLEU hold every pair; and best_pair choosing the checkpoint by one pair."""

import pytest

from model.data.batching import Example
from model.data.demo import numbers_to_words_task
from model.data.language_pairs import LanguagePair, held_out_rows, multilingual_rows
from model.train.checkpointing import criterion
from model.train.config import TrainingError
from model.train.events import Callbacks
from model.train.loop import train
from model.train.pair_validation import SINGLE, pair_metrics, validation_sets
from model.train.prepare import prepare
from model.train.settings import DataSettings
from tests.model.train.test_learning import toy_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py

PAIRS = [LanguagePair("en", "de"), LanguagePair("en", "fr")]


def _example(n: int) -> Example:
    return Example(list(range(3, 3 + n)), list(range(3, 3 + n)))


def test_validation_sets_split_by_pair_and_decode_each_pairs_share_of_the_first_sentences() -> None:
    examples = [_example(n) for n in (4, 5, 6, 7, 8)]
    sets = validation_sets(examples, ["a", "b", "a", "b", "a"], 1024, 3, translate=True)
    assert list(sets) == ["a", "b"]
    assert sum(len(b.src) for b in sets["a"].batches) == 3 and sum(len(b.src) for b in sets["b"].batches) == 2
    assert sets["a"].decode == [examples[0], examples[2]] and sets["b"].decode == [examples[1]]  # of the first 3
    single = validation_sets(examples, [], 1024, 3, translate=True)
    assert list(single) == [SINGLE] and single[SINGLE].decode == examples[:3]
    assert validation_sets(examples, [], 1024, 3, translate=False)[SINGLE].decode == []  # denoising decodes none
    with pytest.raises(ValueError, match="2 pair names for 5 validation examples"):
        validation_sets(examples, ["a", "b"], 1024, 3, translate=True)


def test_pair_metrics_name_each_pair_and_average_them_alike() -> None:
    assert pair_metrics({SINGLE: {"loss": 2.0, "bleu": 10.0}}) == {"loss": 2.0, "bleu": 10.0}
    metrics = pair_metrics({"en-de": {"loss": 2.0, "bleu": 10.0}, "en-nl": {"loss": 4.0}})
    assert metrics == {"loss/en-de": 2.0, "bleu/en-de": 10.0, "loss/en-nl": 4.0, "loss": 3.0, "bleu": 10.0}
    assert criterion(metrics, "loss") == 3.0
    assert criterion(metrics, "loss", "en-nl") == 4.0
    assert criterion(metrics, "bleu", "en-de") == -10.0
    assert criterion(metrics, "bleu", "en-nl") is None  # not measured: the evaluation does not count


def test_prepare_interleaves_the_pairs_validation_examples_and_names_each_ones_pair() -> None:
    rows_by_pair = [numbers_to_words_task(120, seed=0, lang_tgt=p.target) for p in PAIRS]
    train_rows, valid_by_pair = held_out_rows(rows_by_pair, PAIRS, 0.1, seed=0)
    valid_by_pair[1] = valid_by_pair[1][:5] + [(">>fr<< " + "1 " * 40, "un")]  # too long: dropped
    valid = [row for part in valid_by_pair for row in part]
    groups = [str(p) for p, part in zip(PAIRS, valid_by_pair) for _ in part]
    data = prepare(
        "translation",
        multilingual_rows(train_rows, PAIRS),
        valid,
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=24),
        target_languages=["de", "fr"],
        valid_groups=groups,
    )
    assert data.valid_groups[:10] == ["en-de", "en-fr"] * 5  # one of each in turn
    assert data.valid_groups[10:] == ["en-de"] * 7  # en-fr ran out (its long row dropped)
    assert data.stats["valid_dropped"] == 1 and len(data.valid_examples) == 17
    de, fr = (data.tokenizer.language_tokens[t] for t in ("de", "fr"))
    tokens = [e.src_ids[0] for e in data.valid_examples]
    assert tokens == [de if g == "en-de" else fr for g in data.valid_groups]  # each example's own pair


def test_a_run_of_two_pairs_reports_each_pairs_metrics_and_their_mean(tmp_path) -> None:
    rows_by_pair = [numbers_to_words_task(300, seed=0, lang_tgt=p.target) for p in PAIRS]
    train_rows, valid_by_pair = held_out_rows(rows_by_pair, PAIRS, 0.1, seed=0)
    evaluations: list[dict[str, float]] = []
    data = prepare(
        "translation",
        multilingual_rows(train_rows, PAIRS),
        [row for part in valid_by_pair for row in part],
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=24),
        target_languages=["de", "fr"],
        valid_groups=[str(p) for p, part in zip(PAIRS, valid_by_pair) for _ in part],
    )
    config = toy_config(20, eval_every=10, best_metric="bleu", best_pair="en-fr", early_stopping_patience=5)
    result = train(data, config, tmp_path, Callbacks(on_eval=lambda step, m: evaluations.append(m)))
    assert len(evaluations) == 2
    for metrics in evaluations:
        for name in ("loss", "perplexity", "token_accuracy", "bleu", "chrf", "exact_match"):
            per_pair = [metrics[f"{name}/{p}"] for p in PAIRS]
            assert metrics[name] == pytest.approx(sum(per_pair) / 2), name
        assert metrics["loss/en-de"] != metrics["loss/en-fr"]  # measured apart
    assert result.metrics["bleu/en-fr"] == evaluations[-1]["bleu/en-fr"]
    with pytest.raises(TrainingError, match=r"best_pair='en-nl' is not one of the pairs validated: \['en-de', "):
        train(data, toy_config(1, best_pair="en-nl"), tmp_path / "other")
