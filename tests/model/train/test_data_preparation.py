"""Spec of data preparation: the validation split, the tokenizer trained (of the kind asked for) and the model sized,
bad data refused with a readable message, the noise of denoising."""

import random
from dataclasses import replace

import pytest

from model.data.batching import Example
from model.data.demo import reverse_task
from model.data.objectives import mask_spans, mask_tokens
from model.data.special_tokens import MASK_ID
from model.train.config import TrainingError
from model.train.loop import train
from model.train.prepare import prepare, split_validation
from model.train.settings import DataSettings
from model.train.validation import masked_positions
from tests.model.train.support import quick_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py


# -- data preparation -----------------------------------------------------------------------------------------


def test_validation_split_is_deterministic_and_disjoint():
    rows = [(f"s{i}", f"t{i}") for i in range(100)]
    train_rows, valid_rows = split_validation(rows, 0.1, 1000, seed=3)
    assert len(valid_rows) == 10 and set(train_rows).isdisjoint(valid_rows)
    assert split_validation(rows, 0.1, 1000, seed=3) == (train_rows, valid_rows)
    assert split_validation(rows, 0.1, 1000, seed=4)[1] != valid_rows
    assert len(split_validation(rows, 0.5, 7, seed=3)[1]) == 7


def test_prepare_trains_the_tokenizer_and_sizes_the_model(reverse_data):
    assert reverse_data.model_config.vocab_size == reverse_data.tokenizer.vocab_size
    assert reverse_data.stats["train_examples"] + reverse_data.stats["valid_examples"] == 300
    data = prepare(
        "translation",
        reverse_task(50, seed=0),
        preset="tiny",
        model_overrides={"d_model": 32},
        tokenizer=reverse_data.tokenizer,
    )
    assert data.tokenizer is reverse_data.tokenizer and data.model_config.d_model == 32


@pytest.mark.parametrize(
    "objective, rows, kwargs, message",
    [
        ("translation", [("a b", "b a")], {}, "at least 2 rows"),
        ("translation", [], {}, "train_rows is empty"),
        ("translation", [("a", "")] * 5, {}, r"train_rows\[0\] must be a \(source, target\) pair"),
        ("denoising", [("a", "b")] * 5, {}, r"train_rows\[0\] must be a non-empty string"),
        (
            "translation",
            [("a b c d e f g h", "x")] * 10,
            {"settings": DataSettings(max_length=4)},
            "no training examples left.*max_length=4",
        ),
        ("translation", [("a", "b")] * 10, {"vocab_size": 100}, "vocab_size=100"),
        ("translation", [("a", "b")] * 10, {"model_overrides": {"d_model": 30}}, "invalid model config.*d_model=30"),
        ("summarize", [("a", "b")] * 10, {}, "objective"),
    ],
)
def test_prepare_refuses_bad_data_with_a_readable_message(objective, rows, kwargs, message):
    with pytest.raises(TrainingError, match=message):
        prepare(objective, rows, preset="tiny", **{"vocab_size": 300, **kwargs})


def test_a_batch_limit_smaller_than_one_example_is_a_training_error(reverse_data):
    long = Example(list(range(5, 45)), list(range(5, 45)))  # 41 padded tokens: more than the smallest limit, 32
    with pytest.raises(TrainingError, match="max_tokens_per_batch=32"):
        train(replace(reverse_data, train_examples=[long] * 4), quick_config(max_tokens_per_batch=32))


def test_masked_positions_recover_token_and_span_noise():
    rng = random.Random(0)
    for _ in range(200):
        ids = [rng.randint(5, 9) for _ in range(rng.randint(1, 20))]  # few symbols: many ambiguous matches
        src, tgt = mask_tokens(ids, MASK_ID, rng, 0.3)
        assert masked_positions(src, tgt, MASK_ID) == [i for i, t in enumerate(src) if t == MASK_ID]
        src, tgt = mask_spans(ids, MASK_ID, rng, 0.3, 2.0)
        hidden = set(masked_positions(src, tgt, MASK_ID))
        # Spans never touch, so replacing each run of hidden positions by one <mask> gives the source back.
        rebuilt = [MASK_ID if i in hidden else t for i, t in enumerate(tgt) if not (i in hidden and i - 1 in hidden)]
        assert rebuilt == src


@pytest.mark.parametrize("kind", ["bpe", "unigram", "byte_bpe"])
def test_prepare_trains_the_tokenizer_kind_asked_for(kind):
    data = prepare(
        "translation",
        reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0),
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=16, tokenizer=kind),
        seed=0,
    )
    assert data.tokenizer.kind == kind and data.model_config.vocab_size == data.tokenizer.vocab_size


def test_an_unknown_tokenizer_kind_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="tokenizer"):
        DataSettings(max_length=16, tokenizer="sentencepiece")
