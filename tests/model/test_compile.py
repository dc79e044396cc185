"""training.compile and SERVING_COMPILE: the encoder and decoder layers run through torch.compile, and any
compiler failure, when compiling or at a later call (a training step, a validation or served beam search),
falls back to eager layers with the reason logged and the same result."""

from __future__ import annotations

import logging

import pytest
import torch

from model.data.batching import pad_sequences
from model.data.demo import reverse_task
from model.decode.beam import beam_search
from model.nn import compile as compilation
from model.train.config import TrainConfig
from model.train.loop import train
from model.train.prepare import prepare
from model.train.settings import DataSettings


@pytest.fixture(scope="module")
def data():
    rows = reverse_task(120, vocab=12, min_len=2, max_len=8, seed=0)
    overrides = {"dropout": 0.0, "attention_dropout": 0.0}  # same losses with and without compile
    return prepare(
        "translation",
        rows,
        preset="tiny",
        model_overrides=overrides,
        vocab_size=300,
        settings=DataSettings(max_length=16),
        seed=0,
    )


def _config(**overrides) -> TrainConfig:
    base = dict(
        max_steps=3,
        max_tokens_per_batch=128,
        warmup_steps=2,
        peak_lr=1e-3,
        eval_every=100,
        checkpoint_every=100,
        seed=0,
        eval_budget=None,
    )
    return TrainConfig(**{**base, **overrides})


def test_a_compiler_that_fails_when_called_falls_back_to_the_same_eager_training(data, monkeypatch, caplog):
    eager = train(data, _config()).losses
    calls = []

    def broken_compile(fn, **kwargs):
        def compiled(*args, **kw):
            calls.append(kwargs)
            raise RuntimeError("InductorError: no working C compiler")

        return compiled

    monkeypatch.setattr(torch, "compile", broken_compile)
    with caplog.at_level(logging.WARNING, logger="model.nn.compile"):
        result = train(data, _config(compile=True))
    assert calls and calls[0] == {"dynamic": True}  # it was used, then dropped
    assert "torch.compile failed, running without it: RuntimeError: InductorError: no working C compiler" in caplog.text
    assert result.losses == pytest.approx(eager, rel=1e-6)


def test_a_compiler_that_fails_at_once_leaves_the_layers_eager(data, caplog):
    from model.nn.transformer import Transformer

    model = Transformer(data.model_config)

    def refuses(fn, **kwargs):
        raise RuntimeError("torch.compile is not supported on Python 3.14")

    with caplog.at_level(logging.WARNING, logger="model.nn.compile"):
        assert compilation.compile_layers(model, refuses) is False
    assert not any("forward" in layer.__dict__ for layer in model.encoder.layers)
    assert "not supported on Python 3.14" in caplog.text


@pytest.mark.slow
def test_compiled_layers_train_like_eager_ones(data):
    """The real compiler (inductor on this CPU; about a minute to compile): the same losses as eager."""
    eager = train(data, _config()).losses
    compiled = train(data, _config(compile=True)).losses
    assert compiled == pytest.approx(eager, rel=1e-4)


def _broken_compile(fn, **kwargs):
    def compiled(*args, **kw):
        raise RuntimeError("BackendCompilerFailed: inductor raised at a new shape")

    return compiled


def _sources(data, n: int = 6):
    return pad_sequences([[*e.src_ids, data.model_config.eos_id] for e in data.valid_examples[:n]])


def test_a_compiler_failing_during_beam_search_falls_back_to_the_same_eager_hypotheses(data, caplog):
    from model.nn.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(data.model_config)
    eager = [h[0].tokens for h in beam_search(model, _sources(data), beam_size=3)]
    assert compilation.compile_layers(model, _broken_compile) and compilation.is_compiled(model)
    with caplog.at_level(logging.WARNING, logger="model.nn.compile"):
        decoded = compilation.eager_on_failure(model, lambda: beam_search(model, _sources(data), beam_size=3))
    assert [h[0].tokens for h in decoded] == eager
    assert not compilation.is_compiled(model)  # later requests run eagerly from the start
    assert "BackendCompilerFailed: inductor raised at a new shape" in caplog.text


def test_the_callers_own_errors_are_not_retried_and_keep_the_layers_compiled(data):
    from model.nn.transformer import Transformer

    model = Transformer(data.model_config)
    compilation.compile_layers(model, _broken_compile)
    calls = []

    def bad_request():
        calls.append(1)
        raise ValueError("beam_size=0 must be >= 1")

    with pytest.raises(ValueError, match="beam_size=0"):
        compilation.eager_on_failure(model, bad_request, keep=(ValueError,))
    with pytest.raises(torch.OutOfMemoryError):
        compilation.eager_on_failure(model, lambda: (_ for _ in ()).throw(torch.OutOfMemoryError("CUDA out of memory")))
    assert calls == [1] and compilation.is_compiled(model)


@pytest.mark.slow
def test_compiled_layers_decode_like_eager_ones(data):
    """The real compiler on beam search (a KV cache, shapes changing at every step): the same hypotheses."""
    from model.nn.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(data.model_config)
    with torch.inference_mode():
        eager = beam_search(model, _sources(data), beam_size=3, n_best=3)
        assert compilation.compile_layers(model)
        compiled = compilation.eager_on_failure(
            model, lambda: beam_search(model, _sources(data), beam_size=3, n_best=3)
        )
    assert compilation.is_compiled(model)  # it ran compiled, without falling back
    assert [[h.tokens for h in hyps] for hyps in compiled] == [[h.tokens for h in hyps] for hyps in eager]
    for a, b in zip(compiled, eager):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)
