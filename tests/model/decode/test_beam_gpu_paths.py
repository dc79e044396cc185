"""The beam search's GPU-only branches, reached on the CPU by injection: the step recorded as a CUDA graph (and
the fall back to eager when recording fails), the done flag watched without waiting, the fused projection
weights built once per decode, the cross-attention keys and values projected once. They must find what the
CPU's own path finds."""

from __future__ import annotations

import logging

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from model.data.batching import pad_sequences
from model.decode import beam, done_watch, step_graph
from model.decode.done_watch import AsyncWatch, EveryN
from model.decode.fused_weights import fused_weights
from model.nn import attention
from model.nn.attention import MultiHeadAttention
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from tests.model.decode.test_beam import random_sources, single_thread


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig.from_preset("tiny", 40, max_positions=64)).eval()


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with single_thread():
        yield


def search(model: Transformer, **kwargs) -> list[list[tuple]]:
    src = pad_sequences(random_sources(6, seed=8))
    out = beam.beam_search(model, src, beam_size=3, n_best=3, **kwargs)
    return [[(h.tokens, round(h.score, 4), h.finished) for h in hyps] for hyps in out]


@pytest.fixture
def gpu_like(monkeypatch):
    """What a GPU decides, on the CPU: the static cache, no compaction, graphs wanted."""
    monkeypatch.setattr(beam, "cache_capacity", lambda device, positions: positions)
    monkeypatch.setattr(beam, "compacts", lambda device: False)
    monkeypatch.setattr(beam, "use_graph", lambda device, wanted, static_cache, compiled: wanted and static_cache)


def test_the_graph_decision():
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert step_graph.use_graph(cuda, wanted=True, static_cache=True, compiled=False)
    assert not step_graph.use_graph(cpu, wanted=True, static_cache=True, compiled=False)
    assert not step_graph.use_graph(cuda, wanted=False, static_cache=True, compiled=False)
    assert not step_graph.use_graph(cuda, wanted=True, static_cache=False, compiled=False)  # shapes change
    assert not step_graph.use_graph(cuda, wanted=True, static_cache=True, compiled=True)


def test_a_recorded_step_replays_to_the_same_hypotheses(model, gpu_like, monkeypatch):
    """The step is warmed up eagerly, recorded once, then replayed for every later step."""
    expected = search(model, cuda_graphs=False)
    calls = {"record": 0, "replay": 0}

    def record(step, device):  # a graph that replays the step as recorded: what a CUDA graph does
        calls["record"] += 1

        def replay():
            calls["replay"] += 1
            step()

        return replay

    monkeypatch.setattr(step_graph, "record", record)
    assert search(model, max_len_a=0, max_len_b=12, min_len=12) == search(
        model, max_len_a=0, max_len_b=12, min_len=12, cuda_graphs=False
    )
    # 12 steps: the first (one row per sentence), 2 warm-up steps, then 9 replays
    assert calls == {"record": 1, "replay": 12 - 1 - step_graph.WARMUP_STEPS}
    assert search(model) == expected


def test_a_failed_recording_falls_back_to_eager_and_says_why(model, gpu_like, monkeypatch, caplog):
    expected = search(model, cuda_graphs=False)

    def record(step, device):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(step_graph, "record", record)
    with caplog.at_level(logging.WARNING, logger="model.decode.step_graph"):
        assert search(model) == expected
    assert "CUDA graph capture of the beam search step failed, running eagerly" in caplog.text
    assert "operation not permitted when stream is capturing" in caplog.text


class FakeEvent:
    """torch.cuda.Event's answers for a device that finishes a step only when the host waits for it."""

    def __init__(self, finishes_at_once: bool) -> None:
        self.finishes_at_once, self.complete, self.waits = finishes_at_once, False, 0

    def record(self) -> None:
        self.complete = self.finishes_at_once

    def query(self) -> bool:
        return self.complete

    def synchronize(self) -> None:
        self.waits += 1
        self.complete = True


@pytest.mark.parametrize("finishes_at_once, overrun", [(True, 0), (False, done_watch.LAG)])
def test_the_async_watch_learns_the_end_without_a_read(finishes_at_once, overrun):
    """A device that keeps up is seen done at once; one that lags is waited for LAG steps back, never more."""
    events: list[FakeEvent] = []

    def new_event() -> FakeEvent:
        events.append(FakeEvent(finishes_at_once))
        return events[-1]

    watch = AsyncWatch(done_watch.LAG, new_event, torch.zeros(done_watch.LAG + 1, dtype=torch.bool))
    done = torch.zeros(3, dtype=torch.bool)
    steps = 0
    for steps in range(1, 20):
        if steps == 7:
            done[:] = True  # done after step 7
        if watch.all_done(steps, done):
            break
    assert steps == 7 + overrun
    assert sum(e.waits for e in events) == (0 if finishes_at_once else steps - done_watch.LAG)


def test_the_watch_decision(monkeypatch):
    assert isinstance(done_watch.done_watch(torch.device("cpu"), None), EveryN)
    assert done_watch.done_watch(torch.device("cpu"), 8).n == 8
    monkeypatch.setattr(done_watch, "pinned_flags", lambda n: torch.zeros(n, dtype=torch.bool))
    monkeypatch.setattr(torch.cuda, "Event", lambda: FakeEvent(True))
    assert isinstance(done_watch.done_watch(torch.device("cuda"), None), AsyncWatch)
    assert isinstance(done_watch.done_watch(torch.device("cuda"), 8), EveryN)


def test_the_whole_gpu_path_finds_what_the_cpu_path_finds(model, gpu_like, monkeypatch):
    """Static cache, no compaction, a recorded step, the async watch on a device that lags, fused projections."""
    expected = search(model)
    monkeypatch.setattr(step_graph, "record", lambda step, device: step)
    lagging = AsyncWatch(2, lambda: FakeEvent(False), torch.zeros(3, dtype=torch.bool))
    monkeypatch.setattr(beam, "done_watch", lambda device, every: lagging)
    monkeypatch.setattr(MultiHeadAttention, "fuse_projections", True)
    assert search(model) == expected


class Counter(TorchDispatchMode):
    def __init__(self, op) -> None:
        super().__init__()
        self.op, self.count = op, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is self.op
        return func(*args, **(kwargs or {}))


def test_fused_weights_are_concatenated_once_per_decode_not_per_step(model, gpu_like, monkeypatch):
    """With the static cache no step concatenates anything: every aten.cat of a decode (the encoder's included)
    is the fused weights' (Q/K/V and K/V of each attention module), whatever the number of steps."""
    monkeypatch.setattr(MultiHeadAttention, "fuse_projections", True)
    counts = []
    for steps in (5, 15):
        with Counter(torch.ops.aten.cat.default) as cats:
            search(model, max_len_a=0, max_len_b=steps, min_len=steps, cuda_graphs=False)
        counts.append(cats.count)
    n_attention = sum(isinstance(m, MultiHeadAttention) for m in model.modules())
    assert counts == [2 * 2 * n_attention] * 2
    assert all(m.fused_weights is None for m in model.modules() if isinstance(m, MultiHeadAttention))


def test_fused_weights_compute_what_the_separate_projections_do(model, monkeypatch):
    torch.manual_seed(0)
    x = torch.randn(2, 3, model.config.d_model)
    attn = model.decoder.layers[0].self_attn
    with torch.inference_mode():
        apart = attn(x, causal=True)[0]
        monkeypatch.setattr(MultiHeadAttention, "fuse_projections", True)
        with fused_weights(model, x.device):
            assert attn.fused_weights is not None and attn.fused_weights[3][0].shape == (3 * x.size(-1), x.size(-1))
            fused = attn(x, causal=True)[0]
    torch.testing.assert_close(fused, apart, rtol=1e-5, atol=1e-6)


def test_cross_attention_keys_values_and_mask_are_built_once_per_search(model, monkeypatch):
    """The memory's K/V projection (two projections) runs once per decoder layer, on the first step, and the
    cross-attention mask is built there too and reused."""
    projected, masks = [], []
    real_project, real_mask = MultiHeadAttention._project, attention.attention_mask

    def project(self, x, *projections):
        projected.append(len(projections))
        return real_project(self, x, *projections)

    def mask(t_q, t_k, key_padding_mask, causal, device):
        masks.append(causal)
        return real_mask(t_q, t_k, key_padding_mask, causal, device)

    monkeypatch.setattr(MultiHeadAttention, "_project", project)
    monkeypatch.setattr(attention, "attention_mask", mask)
    search(model, max_len_a=0, max_len_b=10, min_len=10)
    n_layers = model.config.n_decoder_layers
    assert projected.count(2) == n_layers  # cross-attention K/V: the first step only
    assert masks.count(False) == model.config.n_encoder_layers + n_layers  # encoder once, cross once per layer


def test_decoding_on_a_gpu_leaves_out_cudnn_attention_and_restores_the_flags_after():
    """cuDNN's attention builds a plan for each new shape (hundreds of ms on an H200), and decoding's shapes change
    with every batch: the decoders run every other kernel of scaled_dot_product_attention on a GPU."""
    from model.decode.greedy import decoding_attention

    flags = (torch.backends.cuda.cudnn_sdp_enabled, torch.backends.cuda.flash_sdp_enabled,
             torch.backends.cuda.mem_efficient_sdp_enabled, torch.backends.cuda.math_sdp_enabled)  # fmt: skip
    before = [f() for f in flags]
    assert before[0], "cuDNN attention is on by default"
    with decoding_attention(torch.device("cuda")):
        assert [f() for f in flags] == [False, True, True, True]
    with decoding_attention(torch.device("cpu")):
        assert [f() for f in flags] == before
    assert [f() for f in flags] == before


def test_a_search_on_a_gpu_model_runs_under_the_decoding_kernels(model, monkeypatch):
    """eval_mode (every decoder's) chooses the kernels from the device of the model's weights."""
    from model.decode import greedy

    devices: list[torch.device] = []
    real = greedy.decoding_attention
    monkeypatch.setattr(greedy, "decoding_attention", lambda device: devices.append(device) or real(device))
    search(model)
    assert devices == [torch.device("cpu")]
