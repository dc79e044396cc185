"""The attention module's GPU paths, run on the CPU: fused projections (forced on) and the preallocated KV cache
compute what the plain ones do."""

from __future__ import annotations

import copy

import pytest
import torch

from model.nn.attention import KVCache, MultiHeadAttention


@pytest.mark.parametrize("cross", [False, True])
def test_fused_projections_compute_what_the_separate_ones_do(cross):
    """The GPU's fused Q/K/V (self-attention) and K/V (cross-attention) products, forced on here, give the
    separate projections' output and gradients, with and without a KV cache."""
    torch.manual_seed(0)
    apart = MultiHeadAttention(32, 4)
    fused = copy.deepcopy(apart)
    apart.fuse_projections, fused.fuse_projections = False, True
    x = torch.randn(2, 5, 32)
    memory = torch.randn(2, 7, 32) if cross else None
    outputs = []
    for module in (apart, fused):
        out, _ = module(x, memory, causal=not cross)
        out.pow(2).sum().backward()
        outputs.append((out, {n: p.grad for n, p in module.named_parameters()}))
    torch.testing.assert_close(outputs[1][0], outputs[0][0], rtol=1e-5, atol=1e-6)
    for name, grad in outputs[0][1].items():
        torch.testing.assert_close(outputs[1][1][name], grad, rtol=1e-4, atol=1e-6, msg=name)
    caches = [KVCache(), KVCache()]
    for t in range(3):  # incremental decoding, one position at a time
        step = [m(x[:, t : t + 1], memory, cache=c)[0] for m, c in zip((apart, fused), caches)]
        torch.testing.assert_close(step[1], step[0], rtol=1e-5, atol=1e-6)
    assert [n for n, _ in fused.named_parameters()][:6] == [
        "q_proj.weight",
        "q_proj.bias",
        "k_proj.weight",
        "k_proj.bias",
        "v_proj.weight",
        "v_proj.bias",
    ]


def test_a_static_cache_writes_in_place_at_the_device_position_and_matches_concatenation():
    """The GPU's cache (model.decode.beam.cache_capacity): each append writes one position of fixed buffers at the
    position tensor; the written positions equal the grown cache's, the others stay zero; reorders keep the
    buffers' addresses."""
    torch.manual_seed(0)
    steps = [(torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)) for _ in range(4)]
    position = torch.zeros(1, dtype=torch.long)
    grown, static = KVCache(), KVCache(capacity=6, position=position)
    pointers = set()
    for i, (k, v) in enumerate(steps):
        expected = grown.append(k, v)
        got = static.append(k, v)
        position += 1
        assert got[0].shape == (3, 2, 6, 4)
        torch.testing.assert_close(got[0][:, :, : i + 1], expected[0])
        torch.testing.assert_close(got[1][:, :, : i + 1], expected[1])
        assert not got[0][:, :, i + 1 :].any() and not got[1][:, :, i + 1 :].any()
        pointers.add(got[0].data_ptr())
        if i == 1:  # beam search following its hypotheses: rows reordered, in step with the plain cache
            index = torch.tensor([2, 0, 0])
            grown.reorder(index), static.reorder(index)
    assert len(pointers) == 1  # written and reordered in place, never reallocated
    with pytest.raises(ValueError, match="one position per call, got 2"):
        static.append(torch.randn(3, 2, 2, 4), torch.randn(3, 2, 2, 4))


def test_a_reorder_taken_at_the_next_append_equals_one_made_at_once():
    """The CPU's grown cache follows the beams inside the next step's concatenation (one copy, not two);
    two reorders before an append compose."""
    torch.manual_seed(0)
    past, new = (torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4)), (torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4))
    at_once, deferred = KVCache(*past), KVCache(*past)
    for index in (torch.tensor([2, 0, 0]), torch.tensor([1, 2, 1])):
        at_once.reorder(index)
        deferred.reorder(index, at_append=True)
    assert torch.equal(deferred.key, past[0])  # nothing copied yet
    for a, b in zip(at_once.append(*new), deferred.append(*new)):
        assert torch.equal(a, b)
    assert deferred._order is None
