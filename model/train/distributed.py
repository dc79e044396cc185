"""Data-parallel training of one model on N processes with torch.distributed (DDP), on one host or several.

Every process (rank) holds a whole replica and takes every N-th micro-batch of the same TokenBatcher order, so
an update sees the same global batch, and leaves the data at the same position, as one process accumulating
grad_accum_steps x N micro-batches. DistributedDataParallel averages the gradients over the ranks during the last
backward of an update (model/train/step.py scales the loss so the average is the gradient per target token of the
whole update). Rank 0 alone evaluates, writes checkpoints and calls back; the checkpoints are those of a single
process (the bare model's weights, no `module.` prefixes), so a run resumes on another number of processes or hosts.
Where the ranks run (which host, which local GPU) changes nothing but `local_rank`: rank r trains the same way on
one host of N processes or on N hosts of one.

On CUDA a rank uses cuda:<local rank> and NCCL; on CPU the gloo backend. Started by PyTorch's elastic launcher
(torchrun, or torch.distributed.launcher.api as worker/training/agent.py does), each rank joins through a store:
on one host a file in the job's private folder (no network listener at all), across hosts the launcher round's
TCPStore on the workers' network:

    ctx = init_process_group(rank, world_size, "cuda", local_rank=local_rank, store=file_store(path, world_size))
    try:
        train(data, config, checkpoint_root, callbacks, dist=ctx)
    finally:
        destroy_process_group()

Nothing a rank receives from another is unpickled: the collectives below carry tensors of numbers or of JSON
text, never Python objects (torch's broadcast_object_list and all_gather_object would unpickle whatever reached
the group's connections).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

if TYPE_CHECKING:  # torch.distributed re-exports these from here without marking them public
    from torch._C._distributed_c10d import Store, TCPStore

T = TypeVar("T")
J = TypeVar("J", bound="str | int | float | bool | None | list[Any] | dict[str, Any]")
S = TypeVar("S", bound=str)
DEFAULT_TIMEOUT = timedelta(minutes=30)  # a collective waits this long for a slow rank (rank 0 evaluating, saving)


class DistributedError(RuntimeError):
    """The process group cannot form or its ranks disagree (other data, another model)."""


def backend_for(device_type: str) -> str:
    """NCCL between GPUs, gloo on CPUs."""
    return "nccl" if device_type == "cuda" else "gloo"


def device_for(local_rank: int, device_type: str) -> torch.device:
    """cuda:local_rank on a GPU host (one GPU per rank of the host), else the CPU."""
    return torch.device("cuda", local_rank) if device_type == "cuda" else torch.device(device_type)


def file_store(path: Path | str, world_size: int) -> Store:
    """A store the ranks of one host meet through: a file in a folder only this job's processes can read, so
    nothing listens on the network. A fresh path per round (a restarted group would find the last round's keys)."""
    store: Store = dist.FileStore(str(path), world_size)  # type: ignore[attr-defined]  # public, re-exported
    return store


def launcher_store(timeout: timedelta = DEFAULT_TIMEOUT, env: dict[str, str] | None = None) -> TCPStore:
    """The store of the round of PyTorch's elastic launcher that started this process: at MASTER_ADDR:MASTER_PORT,
    hosted by the launcher's rank 0 (RANK). The launcher's numbering decides only who hosts it; the process group may
    number the ranks its own way. One store per round: run the launcher with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, or
    a restarted group would find the previous round's keys in the agents' shared store."""
    env = dict(os.environ) if env is None else env
    store: TCPStore = dist.TCPStore(  # type: ignore[attr-defined]  # public, but only implicitly re-exported
        env["MASTER_ADDR"],
        int(env["MASTER_PORT"]),
        int(env["WORLD_SIZE"]),
        is_master=int(env["RANK"]) == 0,
        timeout=timeout,
        multi_tenant=True,
    )
    return store


def init_process_group(
    rank: int,
    world_size: int,
    device_type: str = "cpu",
    *,
    local_rank: int | None = None,
    store: Store,
    timeout: timedelta = DEFAULT_TIMEOUT,
) -> DistContext:
    """Join the default process group as `rank` (on this host's GPU `local_rank`, default `rank`) and return its
    context. The ranks meet through `store` (file_store() on one host, launcher_store() across hosts). The call
    returns once every rank has joined."""
    if not (isinstance(world_size, int) and world_size >= 1 and isinstance(rank, int) and 0 <= rank < world_size):
        raise DistributedError(f"rank={rank!r} must be in [0, world_size={world_size!r})")
    if device_type not in ("cpu", "cuda"):
        raise DistributedError(f"device_type={device_type!r} must be 'cpu' or 'cuda'")
    local_rank = rank if local_rank is None else local_rank
    if device_type == "cuda" and torch.cuda.device_count() <= local_rank:
        raise DistributedError(
            f"local rank {local_rank} needs GPU cuda:{local_rank}, but this host has {torch.cuda.device_count()}"
        )
    if dist.is_initialized():
        raise DistributedError("this process is already in a process group; destroy it first")
    device = device_for(local_rank, device_type)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend_for(device_type),
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=timeout,
        device_id=device if device.type == "cuda" else None,
    )
    return DistContext(rank, world_size, device, backend_for(device_type))


def destroy_process_group() -> None:
    """Leave the default process group, if this process is in one."""
    if dist.is_initialized():
        dist.destroy_process_group()


class _Forward(nn.Module):
    """forward(*args) = fn(module, *args): DDP prepares its gradient all-reduce on every call of forward, so the
    training step's own function (not module.forward) runs inside it."""

    def __init__(self, module: nn.Module, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.module, self.fn = module, fn

    def forward(self, *args: Any) -> Any:
        return self.fn(self.module, *args)


@dataclass
class DistContext:
    """This process's place in the group and the collectives the training loop needs."""

    rank: int
    world_size: int
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that evaluates, writes checkpoints and calls back."""
        return self.rank == 0

    def wrap(self, model: nn.Module, forward: Callable[..., Any]) -> DistributedDataParallel:
        """DDP around forward(model, *args); parameters are broadcast from rank 0 now. The model itself stays
        unwrapped (checkpoints save it, evaluation runs it). Its buffers are constants (sinusoidal positions),
        so they are not broadcast again on every forward."""
        return DistributedDataParallel(
            _Forward(model, forward),
            device_ids=[self.device] if self.device.type == "cuda" else None,
            forward_sync_buffers=False,
        )

    @staticmethod
    def gradient_sync(ddp: DistributedDataParallel, enabled: bool) -> contextlib.AbstractContextManager[None]:
        """Around forward and backward of a micro-batch: all-reduce gradients (the last one of an update) or only
        accumulate them locally (the others)."""
        return contextlib.nullcontext() if enabled else ddp.no_sync()

    def shard(self, items: Sequence[T]) -> list[T]:
        """This rank's share: items rank, rank + N, rank + 2N, ..."""
        return list(items[self.rank :: self.world_size])

    def all_reduce_sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over the ranks (float64)."""
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def all_reduce_sum_tensor(self, t: torch.Tensor) -> torch.Tensor:
        """Element-wise sums over the ranks of a tensor on this rank's device, without reading it back."""
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    def agree(self, proposal: S | None, order: Sequence[S]) -> S | None:
        """The earliest entry of `order` that any rank proposes, or None if none does; the same on every rank."""
        if proposal is not None and proposal not in order:
            raise ValueError(f"proposal {proposal!r} is not one of {list(order)}")
        code = 0 if proposal is None else len(order) - list(order).index(proposal)
        t = torch.tensor([code], dtype=torch.int64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        agreed = int(t.item())
        return None if agreed == 0 else order[len(order) - agreed]

    def broadcast(self, value: J) -> J:
        """Rank 0's JSON value on every rank: its UTF-8 text in a byte tensor, after the text's length."""
        data = json.dumps(value).encode() if self.is_main else b""
        size = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        dist.broadcast(size, src=0)
        buffer = torch.zeros(int(size.item()), dtype=torch.uint8, device=self.device)
        if self.is_main:
            buffer.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        dist.broadcast(buffer, src=0)
        decoded: J = json.loads(buffer.cpu().numpy().tobytes().decode())
        return decoded

    def check_same(self, what: str, value: Any) -> None:
        """Raise DistributedError on every rank unless every rank passed the same JSON-like value: each rank's
        SHA-256 of it, gathered as bytes."""
        digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).digest()
        mine = torch.frombuffer(bytearray(digest), dtype=torch.uint8).to(self.device)
        digests = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(digests, mine)
        differ = [r for r, d in enumerate(digests) if not torch.equal(d, digests[0])]
        if differ:
            raise DistributedError(f"rank(s) {differ} have other {what} than rank 0")

    def seed_step(self, seed: int, step: int) -> None:
        """Dropout noise of rank r > 0 for one update: a function of (seed, step, rank), so the ranks draw
        different masks and a resumed run draws the same ones. Rank 0 keeps the generator that checkpoints save."""
        if self.rank > 0:
            torch.manual_seed(((seed * 1_000_003 + step) * 1_009 + self.rank) % 2**63)

    def abort(self) -> None:
        """Unblock collectives waiting on a dead rank: NCCL would wait until its timeout; gloo fails by itself."""
        if self.backend == "nccl" and dist.is_initialized():
            dist.distributed_c10d._abort_process_group()
