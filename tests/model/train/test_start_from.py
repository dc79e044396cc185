"""model.train.prepare.start_from: a job that starts from a trained model's weights (fine-tuning)."""

from __future__ import annotations

import pytest
import torch

from model.data.demo import numbers_to_words_task
from model.io.checkpoint import load_model
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train.config import TrainConfig, TrainingError
from model.train.loop import train
from model.train.prepare import prepare, start_from
from model.train.settings import DataSettings


def _config(steps: int) -> TrainConfig:
    return TrainConfig(
        max_steps=steps,
        max_tokens_per_batch=512,
        warmup_steps=5,
        eval_every=1000,
        checkpoint_every=1000,
        seed=0,
        eval_budget=None,
    )


def _trained(data, steps: int, root) -> Transformer:
    model, _, _ = load_model(train(data, _config(steps), root).model_checkpoint)
    return model


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    data = prepare(
        "translation",
        numbers_to_words_task(200, seed=0),
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=32),
    )
    return _trained(data, 3, tmp_path_factory.mktemp("parent")), data.tokenizer


def test_training_starts_from_the_parent_weights_and_leaves_them_untouched(parent, tmp_path):
    model, tokenizer = parent
    before = {k: v.clone() for k, v in model.state_dict().items()}
    data = prepare(
        "translation",
        numbers_to_words_task(50, seed=1, low=1000, high=1999),
        tokenizer=tokenizer,
        settings=DataSettings(max_length=32),
    )
    child = start_from(data, model, dropout=0.3)
    assert child.model_config == ModelConfig(**{**model.config.__dict__, "dropout": 0.3})
    assert all(torch.equal(child.init_state[k], v) for k, v in before.items())
    trained = _trained(child, 1, tmp_path)  # one step: from the parent's weights, not a fresh draw
    fresh = Transformer(child.model_config)
    moved = max((trained.state_dict()[k] - before[k]).abs().max().item() for k in before)
    assert 0 < moved < max((fresh.state_dict()[k] - before[k]).abs().max().item() for k in before)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())  # the parent: not written


def test_another_tokenizer_or_an_architecture_change_is_refused(parent):
    model, _ = parent
    own_vocab = prepare(
        "translation",
        numbers_to_words_task(50, seed=1),
        preset="tiny",
        vocab_size=280,
        settings=DataSettings(max_length=32),
    )
    with pytest.raises(TrainingError, match="the model's own tokenizer"):
        start_from(own_vocab, model)
    with pytest.raises(
        TrainingError,
        match=r"only dropout, attention_dropout, n_encoder_layers, n_decoder_layers may change, not \['d_model'\]",
    ):
        start_from(
            prepare(
                "translation", numbers_to_words_task(50), tokenizer=parent[1], settings=DataSettings(max_length=32)
            ),
            model,
            d_model=32,
        )
    with pytest.raises(TrainingError, match="n_decoder_layers=3: shrinking a model of 2 decoder layers keeps 1 to 2"):
        start_from(
            prepare(
                "translation", numbers_to_words_task(50), tokenizer=parent[1], settings=DataSettings(max_length=32)
            ),
            model,
            n_decoder_layers=3,
        )


def test_fewer_layers_start_from_a_spread_subset_of_the_parent_layers(parent, tmp_path):
    model, tokenizer = parent
    data = prepare(
        "translation", numbers_to_words_task(50, seed=1), tokenizer=tokenizer, settings=DataSettings(max_length=32)
    )
    child = start_from(data, model, n_decoder_layers=1)
    assert child.model_config == ModelConfig(**{**model.config.__dict__, "n_decoder_layers": 1})
    parent_state = model.state_dict()
    assert set(child.init_state) == set(Transformer(child.model_config).state_dict())  # loads strictly
    for key, tensor in child.init_state.items():  # decoder layer 0 is the parent's first; the rest as they were
        assert torch.equal(tensor, parent_state[key]), key
    trained = _trained(child, 1, tmp_path)
    assert trained.config.n_decoder_layers == 1
