"""training.compile and SERVING_COMPILE: a training micro-batch runs as one compiled graph (model/train/step_graph.py)
and served models' encoder and decoder layers run through torch.compile; any compiler failure, when compiling or
at a later call (a training step, a validation or served beam search), falls back to eager with the reason logged
and the same result."""

from __future__ import annotations

import logging
import random

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from model.data.batching import Example, collate, pad_sequences
from model.data.demo import reverse_task
from model.decode.beam import beam_search
from model.nn import compile as compilation
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train import step_graph
from model.train.config import TrainConfig
from model.train.loop import train
from model.train.loss import label_smoothed_loss
from model.train.prepare import prepare
from model.train.settings import DataSettings
from model.train.step import autocast_for, batch_logits


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
    with caplog.at_level(logging.WARNING, logger="model.train.step_graph"):
        result = train(data, _config(compile=True))
    assert len(calls) == 1 and calls[0]["fullgraph"] is True  # it was used once, then dropped
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


def test_a_compiled_training_step_trains_like_eager(data, monkeypatch, caplog):
    """training.compile=True trains through the step graph with the eager losses. The graphs go to AOTAutograd's
    backend (aot_eager: the forward and backward graphs inductor gets, run by torch's kernels), counted: inductor's
    own numerics on the step graph are test_the_step_graph_under_inductor_gives_the_eager_loss_and_gradients's (two
    minutes of compiling here on a busy CI machine for what that test checks in one)."""
    eager = train(data, _config()).losses
    counter = CompileCounterWithBackend("aot_eager")
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: real_compile(fn, **{**kwargs, "backend": counter}))
    with caplog.at_level(logging.WARNING, logger="model.train.step_graph"):
        compiled = train(data, _config(compile=True)).losses
    assert counter.frame_count >= 1 and "torch.compile failed" not in caplog.text  # compiled, no fallback
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


@pytest.mark.parametrize(
    ("length", "bucket"), [(1, 8), (8, 8), (9, 16), (64, 64), (65, 80), (129, 160), (256, 256), (257, 320)]
)
def test_lengths_pad_up_to_buckets_at_most_a_quarter_longer(length, bucket):
    assert step_graph.bucket_length(length) == bucket


def _tiny_model() -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=40, d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=32, dropout=0.0
    )
    return Transformer(config)


def _batches() -> list:
    """Batches of several shapes: 1 to 6 rows, source and target lengths from 2 to 15 (buckets 8 and 16)."""
    rng = random.Random(0)

    def batch(rows: int, lo: int, hi: int):
        def ids():
            return [rng.randrange(5, 40) for _ in range(rng.randint(lo, hi))]

        return collate([Example(ids(), ids()) for _ in range(rows)])

    return [batch(3, 2, 6), batch(5, 3, 7), batch(1, 4, 5), batch(4, 9, 12), batch(6, 10, 14), batch(2, 12, 14)]


def _eager(model, b, precision):
    model.zero_grad()
    with autocast_for(torch.device("cpu"), precision):
        logits, target = batch_logits(model, b)
    loss, nll = label_smoothed_loss(logits, target, 0.1)
    loss.backward()
    return loss.item(), nll.item(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_step_graph_compiles_once_per_bucket_and_gives_the_eager_loss_and_gradients(precision):
    """fullgraph=True raises at any graph break; the counting backend sees one compilation per bucket of lengths
    (rows vary freely, a 1-row batch included), and the padded, weighted loss is the eager one over the non-pad
    targets (AOTAutograd's backward, aot_eager: the same graphs inductor gets, run by torch's kernels)."""
    model = _tiny_model()
    counter = CompileCounterWithBackend("aot_eager")
    graph = step_graph.StepGraph(model, 0.1, precision, backend=counter)
    tol = {"fp32": 1e-5, "bf16": 2e-2}[precision]
    buckets = set()
    for b in _batches():
        loss, nll, grads = _eager(model, b, precision)
        model.zero_grad()
        compiled_loss, compiled_nll = graph(b)
        compiled_loss.backward()
        buckets.add(graph.shapes(b)[1])
        assert compiled_loss.item() == pytest.approx(loss, rel=tol)
        assert compiled_nll.item() == pytest.approx(nll, rel=tol)
        scale = max(g.abs().max().item() for g in grads)  # k_proj.bias's gradient is 0 up to rounding: no rtol
        for p, g in zip(model.parameters(), grads):
            assert torch.allclose(p.grad, g, rtol=tol, atol=tol * scale)
    assert buckets == {8, 16}
    assert counter.frame_count == len(buckets)


@pytest.mark.slow
def test_the_step_graph_under_inductor_gives_the_eager_loss_and_gradients():
    """The real compiler on this CPU (about 30 s for one bucket)."""
    model = _tiny_model()
    graph = step_graph.StepGraph(model, 0.1, "fp32")
    for b in _batches()[:3]:  # one bucket
        loss, nll, grads = _eager(model, b, "fp32")
        model.zero_grad()
        compiled_loss, compiled_nll = graph(b)
        compiled_loss.backward()
        assert compiled_loss.item() == pytest.approx(loss, rel=1e-5)
        assert compiled_nll.item() == pytest.approx(nll, rel=1e-5)
        scale = max(g.abs().max().item() for g in grads)
        for p, g in zip(model.parameters(), grads):
            assert torch.allclose(p.grad, g, rtol=1e-4, atol=1e-5 * scale)
