"""model.train.shrink: a smaller model's start from a subset of a larger one's layers."""

from __future__ import annotations

import pytest
import torch

from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train.shrink import kept_layers, shrunk_state


@pytest.mark.parametrize(
    ("n_from", "n_to", "kept"),
    [(3, 1, [0]), (3, 2, [0, 2]), (3, 3, [0, 1, 2]), (6, 3, [0, 2, 5]), (12, 3, [0, 6, 11]), (6, 4, [0, 2, 3, 5])],
)
def test_the_first_and_last_layers_and_evenly_between(n_from, n_to, kept):
    assert kept_layers(n_from, n_to) == kept


@pytest.mark.parametrize("n_to", [0, 4])
def test_no_more_layers_than_there_are_and_at_least_one(n_to):
    with pytest.raises(ValueError, match=f"a stack of 3 layers can give 1 to 3 layers, not {n_to}"):
        kept_layers(3, n_to)


def test_the_kept_layers_renumbered_and_every_other_tensor_copied():
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_encoder_layers=3, n_decoder_layers=3, d_ff=32)
    state = Transformer(config).state_dict()
    small = ModelConfig(**{**config.__dict__, "n_encoder_layers": 2, "n_decoder_layers": 1})
    out = shrunk_state(state, config, 2, 1)
    Transformer(small).load_state_dict(out)  # strict: exactly the smaller model's tensors
    for key, tensor in out.items():
        source = key.replace("encoder.layers.1.", "encoder.layers.2.")  # encoder [0, 2]; decoder [0]
        assert torch.equal(tensor, state[source]), key
        assert tensor.data_ptr() != state[source].data_ptr()  # a copy: training the student leaves the model


def test_a_count_out_of_range_names_the_stack():
    config = ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=32)
    with pytest.raises(ValueError, match="n_decoder_layers=3: shrinking a model of 2 decoder layers keeps 1 to 2"):
        shrunk_state(Transformer(config).state_dict(), config, 2, 3)
