"""Attention over training: each head's entropy and shares of weight on the diagonal, previous, first and </s>."""

from __future__ import annotations

import math

import pytest
import torch

from model.data.batching import Example, collate
from model.data.demo import reverse_task
from model.nn.config import ModelConfig
from model.nn.transformer import AttentionWeights, Transformer
from model.probes.attention_stats import ATTENTION_STATS, attention_stats
from model.train.events import Callbacks
from model.train.loop import train
from model.train.prepare import prepare
from model.train.settings import DataSettings
from tests.model.train.support import quick_config


def _stats(record, kind, layer=0, head=0):
    i = record.groups.index((kind, layer, head))
    return {name: record.stats[name][i] for name in ATTENTION_STATS}


def test_known_attention_patterns_give_known_numbers(monkeypatch):
    """One sentence: 3 source tokens + </s> (S = 4, no padding), <s> + 2 target tokens (T = 3). Head 0 of each kind
    attends exactly to one key per query; head 1 spreads evenly over every key."""
    model = Transformer(ModelConfig.from_preset("tiny", 40))
    batch = collate([Example([5, 6, 7], [8, 9])])
    S, T = batch.src.shape[1], batch.tgt_in.shape[1]
    assert (S, T) == (4, 3)

    def heads(one_hot_keys: list[int], n_keys: int) -> torch.Tensor:
        sharp = torch.zeros(len(one_hot_keys), n_keys)
        sharp[range(len(one_hot_keys)), one_hot_keys] = 1.0
        even = torch.full((len(one_hot_keys), n_keys), 1.0 / n_keys)
        return torch.stack([sharp, even])[None]  # (1, 2, Tq, Tk)

    weights = AttentionWeights(
        encoder_self=[heads([0, 1, 2, 3], S)],  # the diagonal
        decoder_self=[heads([0, 0, 1], T)],  # the previous token (the first query has none: <s> itself)
        cross=[heads([3, 3, 3], S)],  # always </s>
    )
    monkeypatch.setattr(model, "forward_with_attention", lambda src, tgt: (None, weights))
    record = attention_stats(model, batch, step=7)
    assert record.kind == "attention" and record.step == 7
    assert _stats(record, "encoder_self") == {"entropy": 0.0, "diagonal": 1.0, "previous": 0.0, "first": 0.25,
                                              "eos": 0.25}  # fmt: skip
    dec = _stats(record, "decoder_self")
    assert dec["previous"] == pytest.approx(1.0)  # over queries 1 and 2
    assert dec["diagonal"] == pytest.approx(1 / 3) and dec["first"] == pytest.approx(2 / 3) and dec["eos"] is None
    cross = _stats(record, "cross")
    # the monotone diagonal maps target positions 0, 1, 2 to source positions 0, 1.5 -> 2, 3
    assert cross["eos"] == 1.0 and cross["first"] == 0.0 and cross["previous"] is None
    assert cross["diagonal"] == pytest.approx(1 / 3)
    even = _stats(record, "encoder_self", head=1)
    assert even["entropy"] == pytest.approx(math.log(S)) and even["diagonal"] == pytest.approx(1 / S)
    assert _stats(record, "decoder_self", head=1)["entropy"] == pytest.approx(math.log(T))


def test_padding_is_neither_a_query_nor_a_key():
    """A real model: the statistics of a padded batch are the query-weighted means of each sentence's alone."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 40, dropout=0.0))
    short, long = Example([5, 6], [8, 9]), Example([5, 6, 7, 10, 11, 12], [8, 9, 13, 14, 15])
    alone = [attention_stats(model, collate([e]), step=1) for e in (short, long)]
    mixed = attention_stats(model, collate([short, long]), step=1)
    queries = {"encoder_self": (3, 7), "decoder_self": (3, 6), "cross": (3, 6)}  # real positions of src / tgt_in
    for kind, (n_short, n_long) in queries.items():
        for name in ("entropy", "diagonal", "first"):
            a, b, m = (_stats(r, kind, head=1)[name] for r in (*alone, mixed))
            assert m == pytest.approx((n_short * a + n_long * b) / (n_short + n_long), rel=1e-6), (kind, name)
    a, b, m = (_stats(r, "encoder_self")["previous"] for r in (*alone, mixed))
    assert m == pytest.approx((2 * a + 6 * b) / 8, rel=1e-6)  # queries after the first
    n_heads = model.config.n_heads
    expected = (model.config.n_encoder_layers + 2 * model.config.n_decoder_layers) * n_heads
    assert len(mixed.groups) == expected
    for name in ("diagonal", "previous", "first", "eos"):
        assert all(v is None or 0.0 <= v <= 1.0 + 1e-9 for v in mixed.stats[name])
    assert all(v is not None and 0.0 <= v <= math.log(7) + 1e-9 for v in mixed.stats["entropy"])
    assert model.training  # put back as it was


def test_training_records_attention_at_every_evaluation():
    data = prepare("translation", reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0), preset="tiny",
                   vocab_size=300, settings=DataSettings(max_length=16), seed=0)  # fmt: skip
    records = []
    config = quick_config(max_steps=12, eval_every=5, eval_max_sentences=4, dynamics_every=100)
    train(data, config, callbacks=Callbacks(on_dynamics=records.append))
    assert [(r.kind, r.step) for r in records] == [
        ("weights", 1), ("attention", 5), ("attention", 10), ("attention", 12)
    ]  # fmt: skip
    assert records[1].groups == records[3].groups and records[1].stats != records[3].stats
