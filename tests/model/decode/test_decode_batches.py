"""Decoding batches by count and by beam tokens (model/decode/batches.py), and a batch the device has no memory for
decoded in halves (model/decode/queries.translate): the same translations whatever the batching."""

from __future__ import annotations

import pytest
import torch

from model.decode import queries
from model.decode.batches import beam_token_budget, bytes_per_beam_token, decode_batches
from model.nn.config import ModelConfig
from tests.model.decode.test_beam import one_thread, reverse_model  # noqa: F401 (autouse)
from tests.model.decode.test_inference import HELD_OUT


@pytest.fixture(scope="module")
def reverse():  # noqa: ANN201
    return reverse_model()


def test_batches_are_sorted_by_length_and_bounded_by_count():
    lengths = [5, 1, 4, 2, 3]
    assert decode_batches(lengths, max_sentences=2) == [[1, 3], [4, 2], [0]]


def test_batches_are_bounded_by_beam_tokens_as_the_longest_source_grows():
    lengths = [10] * 8 + [40] * 4
    batches = decode_batches(lengths, max_sentences=100, beam_size=4, max_beam_tokens=320)
    # beam 4 x 8 sentences x 10 tokens = 320: one batch; then 4 x 2 x 40 = 320: two of the long ones at a time
    assert [len(b) for b in batches] == [8, 2, 2]
    for batch in batches:
        assert 4 * len(batch) * max(lengths[i] for i in batch) <= 320


def test_a_sentence_alone_over_the_budget_gets_a_batch_of_its_own():
    assert decode_batches([3, 500, 2], max_sentences=8, beam_size=4, max_beam_tokens=100) == [[2, 0], [1]]


@pytest.mark.parametrize(("count", "tokens"), [(0, None), (4, 0)])
def test_bounds_below_one_are_refused_naming_them(count, tokens):
    with pytest.raises(ValueError, match="batch_size=0|max_beam_tokens=0"):
        decode_batches([1, 2], max_sentences=count, max_beam_tokens=tokens)


def test_the_budget_grows_with_free_memory_and_shrinks_with_the_model():
    base = ModelConfig.from_preset("base", 32000)
    big = ModelConfig.from_preset("big", 32000)
    assert bytes_per_beam_token(big, 2) > bytes_per_beam_token(base, 2)
    free = 40 * 2**30  # an H100 with a model loaded
    assert beam_token_budget(base, 2, free) == 2 * beam_token_budget(base, 2, free // 2)
    # base in bf16 on 40 GB free: beam 4, 30-token sources, over a thousand sentences in one batch
    assert beam_token_budget(base, 2, free) // (4 * 30) > 1000


def test_token_bounded_batches_translate_as_fixed_batches_do(reverse):
    model, tokenizer = reverse
    fixed = queries.translate(model, tokenizer, HELD_OUT[:40], beam_size=4, batch_size=32)
    bounded = queries.translate(model, tokenizer, HELD_OUT[:40], beam_size=4, batch_size=1024, max_beam_tokens=200)
    assert [r["text"] for r in bounded] == [r["text"] for r in fixed]
    assert [r["score"] for r in bounded] == pytest.approx([r["score"] for r in fixed], abs=1e-4)


def test_a_batch_out_of_device_memory_is_decoded_in_halves(reverse, monkeypatch):
    """Fault: the device has memory for at most 5 sentences at a time (an injected CUDA out-of-memory error). Pass:
    every sentence is translated, in order, as without the fault; a single sentence out of memory still raises."""
    model, tokenizer = reverse
    expected = queries.translate(model, tokenizer, HELD_OUT[:24], beam_size=4)
    real, sizes = queries.beam_search, []

    def small_device(model, src, *args):
        sizes.append(src.shape[0])
        if src.shape[0] > 5:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(model, src, *args)

    monkeypatch.setattr(queries, "beam_search", small_device)
    got = queries.translate(model, tokenizer, HELD_OUT[:24], beam_size=4, batch_size=24)
    assert [r["text"] for r in got] == [r["text"] for r in expected]
    decoded = [s for s in sizes if s <= 5]
    assert sizes[0] == 24 and sum(decoded) == 24  # tried whole, then each sentence once in a batch that fit

    monkeypatch.setattr(queries, "beam_search", lambda *a: (_ for _ in ()).throw(torch.OutOfMemoryError("oom")))
    with pytest.raises(torch.OutOfMemoryError):
        queries.translate(model, tokenizer, HELD_OUT[:1], beam_size=4)
