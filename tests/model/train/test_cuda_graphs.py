"""The compiled step's CUDA-graph mode, without a GPU: rows padded to buckets, gradients kept allocated so each
replay's outputs are added in place, a step marked per micro-batch, and the same loss and gradients as eager.
Inductor's graph recording itself needs a GPU (bench/gpu_suite.py, train-base-25k-v32k-compile-graphs)."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train import step_graph
from model.train.step import accumulate_gradients
from tests.model.train.test_compile import _batches


@pytest.fixture(autouse=True)
def fresh_compiler():
    """Each test counts its own compilations: those of other tests of this process (the same function compiled
    with other constants) would count towards dynamo's recompile limit."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize(
    ("rows", "bucket"), [(1, 4), (2, 4), (4, 4), (5, 8), (64, 64), (65, 72), (128, 128), (129, 144), (257, 288)]
)
def test_rows_pad_up_to_buckets_at_most_an_eighth_more_past_64(rows, bucket):
    assert step_graph.bucket_rows(rows) == bucket


def test_a_batch_without_rows_is_refused():
    with pytest.raises(ValueError, match="rows=0"):
        step_graph.bucket_rows(0)


def test_cuda_graphs_are_off_until_measured_and_auto_means_a_cuda_device(monkeypatch):
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert not step_graph.use_cuda_graphs(cuda)
    monkeypatch.setattr(step_graph, "CUDA_GRAPHS", "auto")
    assert step_graph.use_cuda_graphs(cuda) and not step_graph.use_cuda_graphs(cpu)
    monkeypatch.setattr(step_graph, "CUDA_GRAPHS", "on")
    assert step_graph.use_cuda_graphs(cpu)


def _model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(
        ModelConfig(vocab_size=40, d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=32, dropout=0)
    )


def test_inductor_is_asked_for_reduce_overhead_only_with_cuda_graphs(monkeypatch):
    modes = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: modes.append(kwargs["mode"]) or fn)
    model = _model()
    step_graph.StepGraph(model, 0.1, "fp32", cuda_graphs=True)
    step_graph.StepGraph(model, 0.1, "fp32", cuda_graphs=False)
    step_graph.StepGraph(model, 0.1, "fp32", backend="aot_eager", cuda_graphs=True)  # the mode is inductor's
    assert modes == ["reduce-overhead", None, None]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_step_with_cuda_graphs_gives_the_eager_update(monkeypatch, precision):
    """Three micro-batches accumulated through the graph (AOTAutograd's graphs, run by torch's kernels), rows
    padded to their buckets: the loss sums and the gradients are the eager step's; the gradient tensors are the
    same objects throughout (added into, never replaced by a replay's output), and each micro-batch starts a step
    of the graph trees."""
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    batches = _batches()[:3]  # 3, 5 and 1 rows: buckets 4, 8 and 4
    model = _model()
    graph = step_graph.StepGraph(model, 0.1, precision, backend=CompileCounterWithBackend("aot_eager"))
    assert not graph.cuda_graphs  # off by default
    graph = step_graph.StepGraph(
        model, 0.1, precision, backend=CompileCounterWithBackend("aot_eager"), cuda_graphs=True
    )
    assert [graph.shapes(b)[0] for b in batches] == [4, 8, 4]
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")

    model.zero_grad(set_to_none=True)
    eager = accumulate_gradients(model, batches, 0.1, autocast)
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)

    seen = {}
    real_call = graph.compiled

    def spy(*args):
        for p in model.parameters():
            seen.setdefault(id(p), p.grad)  # the tensor each gradient is before the first micro-batch's call
        return real_call(*args)

    graph.compiled = spy
    ours = accumulate_gradients(model, batches, 0.1, step_graph=graph)
    assert len(marks) == len(batches)
    assert all(p.grad is seen[id(p)] for p in model.parameters())  # allocated once, added into in place
    tol = {"fp32": 1e-5, "bf16": 2e-2}[precision]
    assert ours[2] == eager[2]
    assert float(ours[0]) == pytest.approx(float(eager[0]), rel=tol)
    assert float(ours[1]) == pytest.approx(float(eager[1]), rel=tol)
    scale = max(g.abs().max().item() for g in want)
    for p, g in zip(model.parameters(), want):
        assert torch.allclose(p.grad, g, rtol=tol, atol=tol * scale)
