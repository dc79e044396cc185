"""The training loader prepares updates ahead in a thread; the loop must see the batcher's order, and a checkpoint
the position of the updates it consumed, never of those prepared ahead."""

from __future__ import annotations

import random
import threading

import pytest
import torch

from model.data.batching import Example, TokenBatcher
from model.train import loader as loader_module
from model.train.loader import Loader, TokenCounts, pin_for
from model.train.loop import train
from model.train.trainer import Trainer

CPU = torch.device("cpu")


def _examples(n: int = 120, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    return [
        Example(
            [rng.randint(5, 99) for _ in range(rng.randint(1, 12))],
            [rng.randint(5, 99) for _ in range(rng.randint(1, 12))],
        )
        for _ in range(n)
    ]


def _batcher(**kwargs) -> TokenBatcher:
    return TokenBatcher(_examples(), max_tokens=64, seed=3, **kwargs)


def _sequence(n: int) -> list[tuple[int, ...]]:
    """The first n batches of a fresh batcher, iterated by hand across epochs."""
    batcher, out = _batcher(), []
    while len(out) < n:
        out.extend(b.indices for b in batcher)
    return out[:n]


def test_updates_come_in_the_batchers_order_across_epochs():
    batcher = _batcher()
    per_epoch = len(batcher)
    with Loader(batcher, micro_batches=3, device=CPU) as loader:
        updates = [loader.next() for _ in range(per_epoch)]  # three epochs' worth of micro-batches
    taken = [b.indices for u in updates for b in u.batches]
    assert taken == _sequence(3 * per_epoch)
    assert updates[-1].epoch == 2 and updates[-1].position == per_epoch


def test_the_batcher_holds_the_position_of_the_consumed_updates_not_of_those_prepared_ahead():
    """Fault: the thread has prepared updates that the loop never takes (a checkpoint, then the process stops).
    Pass: the batcher's state is that after the consumed updates, and a loader resumed from it goes on with the
    very next micro-batch: none lost, none repeated."""
    batcher = _batcher()
    with Loader(batcher, micro_batches=2, device=CPU, depth=3) as loader:
        first = [b.indices for _ in range(7) for b in loader.next().batches]
        state = batcher.state_dict()
    assert batcher.state_dict() == state  # closing with updates still queued leaves it
    resumed = _batcher()
    resumed.load_state_dict(state)
    with Loader(resumed, micro_batches=2, device=CPU) as loader:
        rest = [b.indices for _ in range(20) for b in loader.next().batches]
    assert first + rest == _sequence(54)


def test_a_rank_keeps_its_share_and_counts_every_ranks_tokens():
    batcher = _batcher()
    with Loader(batcher, micro_batches=4, device=CPU, shard=lambda items: items[1::2]) as loader:
        update = loader.next()
    every = _sequence(4)
    assert [b.indices for b in update.batches] == every[1::2]
    reference = TokenBatcher(_examples(), max_tokens=64, seed=3)
    whole = [b for b, _ in zip(reference, range(4))]
    assert update.counts == TokenCounts.of(whole)
    assert update.counts.tgt == sum(len(_examples()[i].tgt_ids) + 1 for idx in every for i in idx)
    assert update.counts.padded_tgt == sum(b.tgt_out.numel() for b in whole) >= update.counts.tgt


def test_an_error_while_preparing_is_raised_by_next_when_its_update_is_due():
    """Fault: the data of epoch 1 cannot be batched (a re-noised example too large). Pass: the updates of epoch 0
    still come, then next() raises the error (again if asked again), and closing does not hang."""

    def source(epoch: int) -> list[Example]:
        return _examples() if epoch == 0 else [Example([5] * 100, [6])]

    batcher = TokenBatcher(source, max_tokens=64, seed=3)
    per_epoch = len(batcher)
    with Loader(batcher, micro_batches=1, device=CPU) as loader:
        assert len([loader.next() for _ in range(per_epoch)]) == per_epoch
        for _ in range(2):
            with pytest.raises(ValueError, match="needs 101 tokens > max_tokens=64"):
                loader.next()


def test_the_thread_prepares_at_most_depth_updates_ahead(monkeypatch):
    collated: list[int] = []
    collate = loader_module.collate
    monkeypatch.setattr(loader_module, "collate", lambda *a: collated.append(1) or collate(*a))
    full = threading.Event()
    with Loader(_batcher(), micro_batches=2, device=CPU, depth=2) as loader:
        loader.next()
        for _ in range(2000):  # the queue fills: the thread then waits to put its next update
            if loader._ready.full():
                full.set()
                break
            full.wait(0.005)
        assert full.is_set()
        # consumed 1, 2 waiting, at most 1 more collated and waiting for room: 4 updates of 2 micro-batches
        assert len(collated) <= (1 + 2 + 1) * 2
    assert not loader._thread.is_alive()


def test_the_trainer_consumes_the_batchers_sequence_with_accumulation(monkeypatch, reverse_data):
    """The loop's micro-batches, in order over steps, are the batcher's sequence: the loader changes when
    batches are made, not which."""
    from model.train.config import TrainConfig

    seen: list[tuple[int, ...]] = []
    step = Trainer._step
    monkeypatch.setattr(
        Trainer, "_step", lambda self, batches, lr: seen.extend(b.indices for b in batches) or step(self, batches, lr)
    )
    config = TrainConfig(
        max_steps=9, grad_accum_steps=3, max_tokens_per_batch=128, eval_every=1000, checkpoint_every=1000, seed=0
    )
    train(reverse_data, config)
    batcher, expected = TokenBatcher(reverse_data.train_examples, 128, shuffle=True, seed=0), []
    while len(expected) < 27:
        expected.extend(b.indices for b in batcher)
    assert seen == expected[:27]


def test_each_step_reports_the_real_and_padded_tokens_of_its_micro_batches(reverse_data):
    from model.train.config import TrainConfig
    from model.train.events import Callbacks

    infos: list = []
    config = TrainConfig(max_steps=4, grad_accum_steps=3, max_tokens_per_batch=128, eval_every=1000, seed=0)
    train(reverse_data, config, callbacks=Callbacks(on_step=infos.append))
    batcher, batches = TokenBatcher(reverse_data.train_examples, 128, shuffle=True, seed=0), []
    while len(batches) < 12:  # across the epoch boundary
        batches.extend(batcher)
    for i, info in enumerate(infos):
        update = batches[3 * i : 3 * i + 3]
        assert info.tokens == sum(b.n_tgt_tokens for b in update)
        assert info.padded_tokens == sum(b.tgt_out.numel() for b in update)
        assert info.src_tokens == sum(b.n_src_tokens for b in update)
        assert info.padded_src_tokens == sum(b.src.numel() for b in update)
        assert info.target_padding == pytest.approx(1 - info.tokens / info.padded_tokens)
        assert info.source_padding == pytest.approx(1 - info.src_tokens / info.padded_src_tokens)
    assert any(info.target_padding > 0 for info in infos)


# -- copies to the device -------------------------------------------------------------------------------------


class _FakeCuda:
    """torch.Tensor.pin_memory, is_pinned and .to as a CUDA build would answer them, recording each copy to a
    "cuda" device as (pinned, non_blocking); the copies stay on the host."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pinned: list[torch.Tensor] = []  # kept alive, so ids stay unique
        self.copies: list[tuple[bool, bool]] = []
        to = torch.Tensor.to

        def pin_memory(t: torch.Tensor) -> torch.Tensor:
            out = t.clone()
            self.pinned.append(out)
            return out

        def is_pinned(t: torch.Tensor) -> bool:
            return any(t is p for p in self.pinned)

        def fake_to(t: torch.Tensor, *args, **kwargs):
            device = args[0] if args else kwargs.get("device")
            if isinstance(device, (torch.device, str)) and torch.device(device).type == "cuda":
                self.copies.append((t.is_pinned(), bool(kwargs.get("non_blocking", False))))
                return t
            return to(t, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
        monkeypatch.setattr(torch.Tensor, "is_pinned", is_pinned)
        monkeypatch.setattr(torch.Tensor, "to", fake_to)


def test_on_a_gpu_every_copy_is_asynchronous_from_pinned_memory(monkeypatch):
    """The CUDA branch on a CPU: each of a micro-batch's 4 tensors is pinned, then copied with
    non_blocking=True, by the loader's thread; a copy from pageable memory would make the host wait."""
    fake = _FakeCuda(monkeypatch)
    cuda = torch.device("cuda", 0)
    with Loader(_batcher(), micro_batches=2, device=cuda, pin=pin_for(cuda)) as loader:
        updates = [loader.next() for _ in range(3)]
    assert len(fake.copies) >= 3 * 2 * 4  # the thread may have copied the next updates already
    assert set(fake.copies) == {(True, True)}
    assert all(t.is_pinned() for u in updates for b in u.batches for t in (b.src, b.tgt_in, b.tgt_out))


def test_on_a_cpu_nothing_is_pinned_or_copied(monkeypatch, reverse_data):
    fake = _FakeCuda(monkeypatch)
    assert pin_for(CPU) is None and pin_for(torch.device("cuda", 0)) is not None
    from model.train.config import TrainConfig

    train(reverse_data, TrainConfig(max_steps=3, eval_every=1000, checkpoint_every=1000))
    assert fake.pinned == [] and fake.copies == []


def test_a_batch_already_on_the_device_is_not_copied_again(monkeypatch):
    """The step's own copy (for callers with host batches) leaves the loader's device batches as they are."""
    fake = _FakeCuda(monkeypatch)
    batch = next(iter(_batcher()))
    on_device = batch.map_tensors(lambda t: t.to("meta"))
    same = loader_module.to_device(on_device, torch.device("meta"), pin_for(torch.device("cuda", 0)))
    assert same.src is on_device.src and fake.pinned == []


@pytest.fixture
def reverse_data():
    from model.data.demo import reverse_task
    from model.train.prepare import prepare
    from model.train.settings import DataSettings

    return prepare(
        "translation",
        reverse_task(120, vocab=12, min_len=2, max_len=8, seed=0),
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=16),
        seed=0,
    )
