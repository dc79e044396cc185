"""The beam search keeps its state on the device: a step reads nothing back to the host, and whether every
sentence is done is read once per check_every steps; the hypotheses become Python objects once, at the end. On
a GPU each read would wait for every step queued before it, and a CUDA graph cannot hold one."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from model.data.batching import pad_sequences
from model.decode import beam, beam_state
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from tests.model.decode.test_beam import random_sources, single_thread

STEPS = 30


READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")


class HostReads(TorchDispatchMode):
    """Counts what makes a device's host wait: reads of values (.item(), .tolist(), bool(t), int(t), float(t)),
    and ops whose result size depends on the data (nonzero, masked_select, boolean-mask indexing).

    The reads are counted where Python calls them, on torch.Tensor, one per call (a .tolist() is one transfer):
    under inference_mode (where the search runs) aten._local_scalar_dense does not reach a dispatch mode, and
    .tolist() never did. The ops sized by the data are counted as they are dispatched."""

    SIZED_BY_DATA = (torch.ops.aten.nonzero.default, torch.ops.aten.masked_select.default)

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.counting = False  # inside the with block only
        for name in READS:
            monkeypatch.setattr(torch.Tensor, name, self._counted(name, getattr(torch.Tensor, name)))

    def _counted(self, name: str, method):
        def read(tensor, *args, **kwargs):
            if self.counting:
                self.ops.append(name)
            return method(tensor, *args, **kwargs)

        return read

    def __enter__(self):
        self.counting = True
        return super().__enter__()

    def __exit__(self, *exc):
        self.counting = False
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        boolean_index = func is torch.ops.aten.index.Tensor and any(
            i is not None and i.dtype == torch.bool for i in args[1]
        )
        if self.counting and (func in self.SIZED_BY_DATA or boolean_index):
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_the_counter_sees_reads_under_inference_mode(monkeypatch):
    with torch.inference_mode(), HostReads(monkeypatch) as reads:
        x = torch.tensor([1.0, 0.0, 2.0])
        bool(x.all()), x.sum().item(), int(x.sum()), float(x[0]), x.tolist(), x.nonzero(), x[x > 0]
    assert reads.ops == ["__bool__", "item", "__int__", "__float__", "tolist", "aten.nonzero.default",
                         "aten.index.Tensor"]  # fmt: skip


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig.from_preset("tiny", 40, max_positions=64)).eval()


@pytest.fixture
def gpu_like(monkeypatch):
    """What a GPU runs, injected on the CPU: the static KV cache, and no compaction of the batch."""
    monkeypatch.setattr(beam, "cache_capacity", lambda device, positions: positions)
    monkeypatch.setattr(beam, "compacts", lambda device: False)


def decode_counting(monkeypatch, model: Transformer, src=None, **kwargs) -> tuple[HostReads, list[int], list]:
    """A search (by default of 6 sentences and exactly STEPS steps: </s> forbidden until the limit), its reads
    counted up to the final conversion; also the reads of each step alone."""
    reads, per_step = HostReads(monkeypatch), []
    real_step, real_hypotheses = beam_state.step, beam._hypotheses

    def counted_step(*args, **kw):
        before = len(reads.ops)
        real_step(*args, **kw)
        per_step.append(len(reads.ops) - before)

    def conversion(*args, **kw):
        reads.counting = False  # the one conversion at the end is not the loop's
        return real_hypotheses(*args, **kw)

    monkeypatch.setattr(beam, "step", counted_step)
    monkeypatch.setattr(beam, "_hypotheses", conversion)
    if src is None:
        src = pad_sequences(random_sources(6, seed=4))
        kwargs = dict(beam_size=4, max_len_a=0, max_len_b=STEPS, min_len=STEPS) | kwargs
    with single_thread(), reads:
        out = beam.beam_search(model, src, **kwargs)
    return reads, per_step, out


@pytest.mark.parametrize("every", [8, 16])
def test_a_30_step_search_on_the_gpu_path_reads_once_per_check(monkeypatch, model, gpu_like, every):
    reads, per_step, out = decode_counting(monkeypatch, model, check_every=every)
    assert len(per_step) == STEPS and per_step == [0] * STEPS  # no step reads anything
    # one read before the loop (does any sentence have padding), then one per check; none after the last step
    assert len(reads.ops) == 1 + (STEPS - 1) // every <= math.ceil(STEPS / every) + 1
    assert set(reads.ops) == {"__bool__"}
    assert all(len(h.tokens) == STEPS and not h.finished for hyps in out for h in hyps)


def test_the_cpu_path_reads_once_per_check_too(monkeypatch, model):
    """The CPU's grown cache and compaction: without sentences done early, one read per check."""
    reads, per_step, _ = decode_counting(monkeypatch, model, check_every=8)
    assert per_step == [0] * STEPS
    assert len(reads.ops) <= math.ceil(STEPS / 8) + 1


def test_compaction_reads_only_at_the_checks(monkeypatch, model):
    """Sentences with different limits end at different steps and leave the batch at a check, found there with
    nonzero: the steps still read nothing."""
    sources = [[5] * n + [2] for n in (1, 4, 9, 14)]  # limits 2 * (n + 1) + 10: 14, 20, 30 and 40 tokens
    src = pad_sequences(sources)
    reads, per_step, compacted = decode_counting(monkeypatch, model, src, beam_size=3, min_len=40, check_every=4)
    assert per_step == [0] * 40
    # the checks after steps 16, 20 and 32 find newly done sentences (two nonzero each); the others read once
    assert reads.ops.count("aten.nonzero.default") == 2 * 3
    assert len(reads.ops) == 2 * 3 + 1 + 39 // 4  # and one read before the loop and one per check
    monkeypatch.setattr(beam, "compacts", lambda device: False)
    with single_thread():
        kept = beam.beam_search(model, src, beam_size=3, min_len=40, check_every=4)
    assert [[h.tokens for h in hyps] for hyps in compacted] == [[h.tokens for h in hyps] for hyps in kept]
    for a, b in zip(compacted, kept):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
