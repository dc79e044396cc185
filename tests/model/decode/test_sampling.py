"""Spec of sampled decoding (model/decode/sampling.py): the draw follows softmax(logits / T) over the top k, a seed
repeats a call, top_k=1 is greedy search, and on a trained model a cool temperature translates as well as greedy."""

from __future__ import annotations

import pytest
import torch

from model.data.tokenizer import Tokenizer
from model.decode.greedy import greedy_decode
from model.decode.sampling import Sampling, draw, sample_decode, sample_translate
from model.nn.transformer import Transformer
from tests.model.decode.test_beam import one_thread, reverse_model  # noqa: F401 (one_thread: autouse)
from tests.model.decode.test_decoding_greedy import copy_batch, copy_model  # noqa: F401 (a fixture)
from tests.model.decode.test_inference import HELD_OUT


@pytest.fixture(scope="module")
def reverse() -> tuple[Transformer, Tokenizer]:
    return reverse_model()


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_draws_follow_the_tempered_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0, float("-inf")]])
    for temperature in (0.5, 1.0, 2.0):
        n = 20_000
        ids = draw(logits.expand(n, -1), Sampling(temperature=temperature), generator())
        seen = torch.bincount(ids, minlength=4).float() / n
        expected = torch.softmax(logits[0] / temperature, dim=-1)
        assert seen[3] == 0  # a token at -inf is never drawn
        assert torch.allclose(seen, expected, atol=0.015), (temperature, seen, expected)


def test_top_k_draws_only_among_the_k_likeliest():
    logits = torch.randn(500, 50, generator=generator(1))
    ids = draw(logits, Sampling(top_k=3), generator())
    top3 = logits.topk(3, dim=-1).indices
    assert (top3 == ids[:, None]).any(dim=1).all()
    assert torch.equal(draw(logits, Sampling(top_k=1), generator()), logits.argmax(dim=-1))


def test_settings_out_of_range_are_refused():
    with pytest.raises(ValueError, match="temperature=0"):
        Sampling(temperature=0)
    with pytest.raises(ValueError, match="top_k=-1"):
        Sampling(top_k=-1)


def test_top_1_is_greedy_search_and_a_seed_repeats_a_call(copy_model):  # noqa: F811 (the fixture)
    src, _, _ = copy_batch(generator(5), batch_size=16)
    assert sample_decode(copy_model, src, Sampling(top_k=1), generator()) == greedy_decode(copy_model, src)
    hot = Sampling(temperature=5.0)
    first = sample_decode(copy_model, src, hot, generator(3))
    assert sample_decode(copy_model, src, hot, generator(3)) == first
    assert sample_decode(copy_model, src, hot, generator(4)) != first  # 16 sentences at T=5: never all alike


def test_cool_sampling_translates_held_out_sentences(reverse):
    model, tokenizer = reverse
    texts = sample_translate(model, tokenizer, HELD_OUT, Sampling(temperature=0.1), batch_size=7)
    exact = sum(t == " ".join(reversed(s.split())) for t, s in zip(texts, HELD_OUT)) / len(HELD_OUT)
    assert exact >= 0.9
    assert sample_translate(model, tokenizer, HELD_OUT, Sampling(temperature=0.1), batch_size=7) == texts
    varied = sample_translate(model, tokenizer, HELD_OUT, Sampling(temperature=3.0, seed=1))
    assert sum(t != u for t, u in zip(texts, varied)) >= len(HELD_OUT) // 4  # hot samples wander from the answer


def test_texts_are_refused_as_one_string(reverse):
    model, tokenizer = reverse
    with pytest.raises(ValueError, match="list of strings"):
        sample_translate(model, tokenizer, "one text", Sampling())
