"""A training step reads values back from the device once (model.train.step.to_host), not once per micro-batch and
value, and training reads them once per log_every steps: on a GPU each read waits for the device to finish
everything queued before it. Nor does the host wait on its copies of the batches to the device: they are made
from pinned memory with non_blocking=True (model/train/loader.py)."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from model.data.batching import Example, collate
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train import step, step_log
from model.train.config import TrainConfig, TrainingError
from model.train.events import Callbacks
from model.train.loader import to_device
from model.train.loop import train


class ScalarReads(TorchDispatchMode):
    """Counts aten._local_scalar_dense: what .item(), float(t) and bool(t) of a tensor run."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


class DeviceWaits(TorchDispatchMode):
    """Counts the ops that make a GPU's host wait: scalar reads, and ops whose result size depends on the data
    (nonzero, masked_select, indexing with a boolean mask), as the host must learn that size before going on."""

    SIZED_BY_DATA = (torch.ops.aten.nonzero.default, torch.ops.aten.masked_select.default)

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        boolean_index = func is torch.ops.aten.index.Tensor and any(
            i is not None and i.dtype == torch.bool for i in args[1]
        )
        if func is torch.ops.aten._local_scalar_dense.default or func in self.SIZED_BY_DATA or boolean_index:
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class SynchronousCopies(TorchDispatchMode):
    """Counts the copies from the host to another device that the host waits for: aten._to_copy and aten.copy_
    without non_blocking. (From pageable memory a copy waits even when it asks not to: the loader pins first.)"""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.asynchronous = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default:
            src, dst, non_blocking = args[0].device, kwargs.get("device", args[0].device), kwargs.get("non_blocking")
        elif func is torch.ops.aten.copy_.default:
            src, dst = args[1].device, args[0].device
            non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking")
        else:
            return func(*args, **kwargs)
        if src.type == "cpu" and dst.type != "cpu":
            if non_blocking:
                self.asynchronous += 1
            else:
                self.count += 1
        return func(*args, **kwargs)


def _batches(n: int) -> list:
    rows = [Example([5 + i % 30, 6 + i % 20, 7 + i], [8 + i, 9, 10 + i % 25][: 1 + i % 3]) for i in range(16)]
    return [collate(rows[i::n]) for i in range(n)]


def test_accumulating_four_micro_batches_reads_nothing_back():
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 48, dropout=0.0))
    batches = _batches(4)  # built on the host, before: collate counts tokens there
    with ScalarReads() as reads:
        loss_sum, nll_sum, n_tokens = step.accumulate_gradients(model, batches, smoothing=0.1)
    assert reads.count == 0  # was 2 per micro-batch (.item() of the loss and the NLL)
    assert loss_sum.dtype == torch.float64 and float(loss_sum) > float(nll_sum) > 0 and n_tokens > 0


def test_a_micro_batch_never_waits_for_the_device():
    """The non-pad target positions come with the batch (found on the host), not from a boolean mask on the
    device: `hidden[tgt_out != pad]` made each micro-batch wait for a GPU to count the mask."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 48, dropout=0.0))
    batches = _batches(4)
    with DeviceWaits() as waits, SynchronousCopies() as copies:
        step.accumulate_gradients(model, batches, smoothing=0.1)
    assert waits.ops == [] and copies.count == 0


def test_the_copy_counter_sees_a_copy_the_host_waits_for():
    """The counter's own check, on the "meta" device (no data, but a device other than the host's)."""
    t = torch.arange(6)
    with SynchronousCopies() as copies:
        t.to("meta")
        torch.empty(6, dtype=torch.long, device="meta").copy_(t)
        t.to("meta", non_blocking=True)
        torch.empty(6, dtype=torch.long, device="meta").copy_(t, non_blocking=True)
        t.to("cpu")
    assert (copies.count, copies.asynchronous) == (2, 2)


def test_a_batch_goes_to_the_device_without_a_wait_once_pinned():
    """A device that pins (CUDA): the 4 tensors of a micro-batch are copied with non_blocking=True. Without
    pinning (what Batch.to did for every micro-batch), each of the 4 copies makes the host wait."""
    batch = _batches(1)[0]
    meta = torch.device("meta")
    pinned: list[torch.Tensor] = []
    with SynchronousCopies() as copies:
        on_device = to_device(batch, meta, lambda t: pinned.append(t) or t)
    assert (copies.count, copies.asynchronous, len(pinned)) == (0, 4, 4)
    assert on_device.src.device == on_device.target_positions.device == meta
    with SynchronousCopies() as copies:
        to_device(batch, meta, None)
    assert (copies.count, copies.asynchronous) == (4, 0)


def test_target_positions_select_the_same_logits_as_a_mask():
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 48, dropout=0.0)).eval()
    batch = _batches(1)[0]
    logits, target = step.batch_logits(model, batch)
    pad = model.config.pad_id
    keep = batch.tgt_out != pad  # (B, T)
    full = model.project(model.decode(batch.tgt_in, model.encode(batch.src, batch.src == pad), batch.src == pad))
    assert target.tolist() == batch.tgt_out[keep].tolist() and len(target) == batch.n_tgt_tokens
    torch.testing.assert_close(logits, full[keep])
    halves = batch.halves()
    assert sum(len(h.target_positions) for h in halves) == batch.n_tgt_tokens


def test_a_step_reads_loss_nll_and_gradient_norm_in_one_transfer(monkeypatch):
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 48, dropout=0.0))
    config = TrainConfig()
    reads: list[int] = []
    to_host = step.to_host
    monkeypatch.setattr(step, "to_host", lambda *values: reads.append(len(values)) or to_host(*values))
    result = step.train_step(model, step.build_optimizer(model, config), _batches(4), 1e-3, config)
    assert reads == [3]
    assert result.loss > result.nll_loss > 0 and result.grad_norm > 0


@pytest.fixture
def reverse_data():
    from model.data.demo import reverse_task
    from model.train.prepare import prepare
    from model.train.settings import DataSettings

    return prepare(
        "translation",
        reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0),
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=16),
        seed=0,
    )


def _read_counts(monkeypatch) -> list[int]:
    reads: list[int] = []
    to_host = step.to_host
    monkeypatch.setattr(step, "to_host", lambda *values: reads.append(len(values)) or to_host(*values))
    return reads


def _train(data, **settings):
    config = TrainConfig(
        max_steps=12,
        grad_accum_steps=3,
        max_tokens_per_batch=128,
        warmup_steps=4,
        peak_lr=1e-3,
        eval_every=1000,
        checkpoint_every=1000,
        seed=0,
        eval_budget=None,
        **settings,
    )
    infos: list = []
    return train(data, config, callbacks=Callbacks(on_step=infos.append)), infos


def test_training_on_a_cpu_reads_the_device_once_per_step(monkeypatch, reverse_data):
    reads = _read_counts(monkeypatch)
    result, _ = _train(reverse_data)
    assert result.step == 12 and reads == [3] * 12  # 3 micro-batches a step once cost 7 reads a step


def test_with_log_every_the_steps_are_read_once_per_interval_and_all_reported_alike(monkeypatch, reverse_data):
    """What a GPU does by default (log_every 10 there): 12 steps by 5 are 3 reads (5, 5 and the last 2 steps),
    and every step is reported with the numbers it has when read one at a time."""
    assert TrainConfig(device="cuda").resolved_log_every == 10 and TrainConfig().resolved_log_every == 1
    _, each = _train(reverse_data)
    reads = _read_counts(monkeypatch)
    result, grouped = _train(reverse_data, log_every=5)
    assert reads == [15, 15, 6]
    assert [i.step for i in grouped] == list(range(1, 13)) == [i.step for i in each]
    for a, b in zip(grouped, each):
        assert (a.loss, a.nll_loss, a.grad_norm, a.lr, a.tokens, a.epoch) == pytest.approx(
            (b.loss, b.nll_loss, b.grad_norm, b.lr, b.tokens, b.epoch), rel=1e-6
        )
        assert (a.padded_tokens, a.src_tokens, a.padded_src_tokens) == (
            b.padded_tokens,
            b.src_tokens,
            b.padded_src_tokens,
        )
    assert result.losses == pytest.approx([i.loss for i in each], rel=1e-6)
    assert all(i.elapsed > 0 and i.tokens_per_second > 0 for i in grouped)


def test_a_diverged_step_fails_the_run_at_the_read_naming_its_step(monkeypatch, reverse_data):
    real = step.read_steps

    def read(pending):
        results = real(pending)
        for r in results[1:2]:  # the second step of the first interval of 3 diverges
            r.loss = float("nan")
        return results

    monkeypatch.setattr(step_log, "read_steps", read)
    with pytest.raises(TrainingError, match="the training loss became nan at step 2"):
        _train(reverse_data, log_every=3)
