"""The training input: the next updates' micro-batches made ready in a background thread while the device computes
the current one.

For each update the loader takes grad_accum_steps x world_size micro-batches from the batcher's plan, in the
order the loop always took them, collates them (target_positions included, on the host), keeps this rank's share
(dist.shard), and on a GPU pins each tensor in page-locked memory and copies it with non_blocking=True. A copy
from pageable memory makes the host wait until the device has run everything queued before it; from pinned memory
the host only enqueues it. At most `depth` updates wait ready, so memory stays bounded.

The batcher's (epoch, position) is that of the updates handed to the loop, never of those prepared ahead: a
checkpoint written after update n resumes at update n + 1 even when n + 2 is already in the queue.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType

import torch
from torch import Tensor

from model.data.batching import Batch, TokenBatcher, collate
from model.train.config import TrainingError

Pin = Callable[[Tensor], Tensor]


def pin_for(device: torch.device) -> Pin | None:
    """Pinning where it makes copies to the device asynchronous (CUDA); None elsewhere: a CPU-only torch raises
    on pinning, and a copy to the CPU is no copy."""
    return (lambda t: t.pin_memory()) if device.type == "cuda" else None


def to_device(batch: Batch, device: torch.device, pin: Pin | None) -> Batch:
    """The batch on the device. With pin, each host tensor is pinned and copied with non_blocking=True: the host
    goes on at once, and torch's pinned-memory allocator keeps the block until the copy has run."""

    def copy(t: Tensor) -> Tensor:
        if pin is None or t.device.type != "cpu":  # a tensor already on the device is returned as it is
            return t.to(device)
        return pin(t).to(device, non_blocking=True)

    return batch.map_tensors(copy)


@dataclass(frozen=True)
class TokenCounts:
    """Real and padded positions of an update's micro-batches, every rank's: the share of the work that pads."""

    src: int
    padded_src: int
    tgt: int
    padded_tgt: int

    @classmethod
    def of(cls, batches: Sequence[Batch]) -> TokenCounts:
        return cls(
            sum(b.n_src_tokens for b in batches),
            sum(b.padded_src_tokens for b in batches),
            sum(b.n_tgt_tokens for b in batches),
            sum(b.padded_tgt_tokens for b in batches),
        )


@dataclass
class Update:
    """One optimizer update's input."""

    batches: list[Batch]  # this rank's micro-batches, on the device
    counts: TokenCounts  # over the micro-batches of every rank
    epoch: int  # the batcher's epoch and position after the update's last micro-batch
    position: int


class Loader:
    """Updates from the batcher's current position on, prepared `depth` ahead in a thread. Use it as a context
    manager (the thread stops on exit); next() hands over one update and moves the batcher's position past it."""

    def __init__(
        self,
        batcher: TokenBatcher,
        micro_batches: int,
        device: torch.device,
        shard: Callable[[list[Batch]], list[Batch]] | None = None,
        pin: Pin | None = None,
        depth: int = 2,
    ) -> None:
        if micro_batches < 1:
            raise ValueError(f"micro_batches={micro_batches} must be >= 1")
        if depth < 1:
            raise ValueError(f"depth={depth} must be >= 1")
        if device.type == "cuda" and device.index is None:
            # the thread's current device is not the loop's (torch.cuda.set_device is per thread)
            device = torch.device("cuda", torch.cuda.current_device())
        self.batcher, self.micro_batches, self.device = batcher, micro_batches, device
        self.shard, self.pin = shard, pin
        self._ready: queue.Queue[Update | BaseException] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="training-loader", daemon=True)
        self._thread.start()

    def next(self) -> Update:
        """The next update; the batcher's state becomes that after its last micro-batch (what a checkpoint saves).
        An error met while preparing it (an example too large in a re-noised epoch, ...) is raised here."""
        if self._error is not None:
            raise self._error
        while True:
            try:
                item = self._ready.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._ready.empty():
                    raise RuntimeError("the training loader has stopped") from None
        if isinstance(item, BaseException):
            self._error = item
            raise item
        self.batcher.epoch, self.batcher.position = item.epoch, item.position
        return item

    def close(self) -> None:
        """Stop the thread; the updates prepared but not handed over are dropped (the batcher never counted them)."""
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._ready.get_nowait()  # a put waiting for room returns and sees the stop
            except queue.Empty:
                pass
            self._thread.join(timeout=0.05)

    def __enter__(self) -> Loader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the thread -------------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            for update in self._updates():
                if not self._put(update):
                    return
        except BaseException as exc:  # handed to the loop, which raises it from next()
            self._put(exc)

    def _put(self, item: Update | BaseException) -> bool:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def _updates(self) -> Iterator[Update]:
        micro = self._micro_batches()
        while not self._stop.is_set():
            taken = [next(micro) for _ in range(self.micro_batches)]
            batches = [batch for batch, _, _ in taken]
            # rank r takes micro-batches r, r + N, ...: one process's global batch
            mine = self.shard(batches) if self.shard is not None else batches
            _, epoch, position = taken[-1]
            yield Update([to_device(b, self.device, self.pin) for b in mine], TokenCounts.of(batches), epoch, position)

    def _micro_batches(self) -> Iterator[tuple[Batch, int, int]]:
        """(batch, epoch, position after it) from the batcher's position on, across epochs."""
        epoch, position = self.batcher.epoch, self.batcher.position
        examples, plan = self.batcher.plan(epoch)
        while True:
            if position >= len(plan):
                epoch, position = epoch + 1, 0
                examples, plan = self.batcher.plan(epoch)
                if not plan:
                    raise TrainingError(f"the training data yields no batches in epoch {epoch}")
            idx = plan[position]
            position += 1
            yield collate([examples[i] for i in idx], idx), epoch, position
