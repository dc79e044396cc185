"""One optimizer update as in the paper (Sec. 5.3, 5.4): label-smoothed loss on the non-pad target positions,
gradients accumulated over micro-batches (and data-parallel ranks) per target token, clipping, Adam."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from torch import Tensor

from model.batching import Batch
from model.loss import label_smoothed_loss
from model.train_config import TrainConfig
from model.transformer import Transformer

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

    from model.distributed import DistContext


def batch_logits(model: Transformer, batch: Batch) -> tuple[Tensor, Tensor]:
    """(logits (N, V), targets (N,)) at the N non-pad target positions only.

    Same as model(batch.src, batch.tgt_in)[non-pad], but the pre-softmax projection, usually the largest
    matrix, never runs on padding.
    """
    pad = model.config.pad_id
    src_key_padding_mask = batch.src == pad  # (B, S)
    memory = model.encode(batch.src, src_key_padding_mask)  # (B, S, d_model)
    hidden = model.decode(batch.tgt_in, memory, src_key_padding_mask)  # (B, T, d_model)
    keep = batch.tgt_out != pad  # (B, T)
    return model.project(hidden[keep]), batch.tgt_out[keep]  # (N, V), (N,)


def autocast_for(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager[object]:
    """bf16 autocast on CUDA when asked; fp32 everywhere else."""
    if bf16 and device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def accumulate_gradients(
    model: Transformer | DistributedDataParallel,
    micro_batches: Sequence[Batch],
    smoothing: float,
    autocast: contextlib.AbstractContextManager[object] | None = None,
    dist: DistContext | None = None,
) -> tuple[float, float, int]:
    """Backward over micro-batches, each scaled by the total target tokens of all of them, so the gradient
    equals that of one batch holding them all. Returns (smoothed loss sum, NLL sum, target tokens).

    Data-parallel (dist, and model = dist.wrap(...)): micro_batches are this rank's share of the update; the token
    count and the sums are over all ranks, and as DDP averages the ranks' gradients each loss is scaled by
    world_size / tokens, so the gradient is again the one per target token of the whole update."""
    n_tokens = sum(b.n_tgt_tokens for b in micro_batches)
    if dist is not None:
        n_tokens = int(dist.all_reduce_sum([n_tokens])[0])
    scale = n_tokens / (dist.world_size if dist is not None else 1)
    device = next(model.parameters()).device
    loss_sum = nll_sum = 0.0
    # with dist, model is dist.wrap(...) (DDP around batch_logits); without, the bare Transformer
    ddp = cast("DistributedDataParallel", model)
    for i, b in enumerate(micro_batches):
        b = b.to(device)
        last = i == len(micro_batches) - 1  # DDP all-reduces the gradients during the last backward only
        with dist.gradient_sync(ddp, last) if dist is not None else contextlib.nullcontext():
            with autocast if autocast is not None else contextlib.nullcontext():
                logits, target = model(b) if dist is not None else batch_logits(cast(Transformer, model), b)
            loss, nll = label_smoothed_loss(logits, target, smoothing)
            (loss / scale).backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        loss_sum += loss.item()
        nll_sum += nll.item()
    if dist is not None:
        loss_sum, nll_sum = dist.all_reduce_sum([loss_sum, nll_sum])
    return loss_sum, nll_sum, n_tokens


@dataclass
class StepResult:
    loss: float  # label-smoothed cross entropy per target token
    nll_loss: float  # cross entropy per target token without smoothing
    grad_norm: float  # global L2 norm before clipping
    n_tokens: int


def build_optimizer(model: Transformer, config: TrainConfig) -> torch.optim.Adam:
    """Adam with the paper's beta1=0.9, beta2=0.98, eps=1e-9 (Sec. 5.3); lr is set per step by the schedule."""
    fused = next(model.parameters()).device.type == "cuda"  # one kernel for all parameters
    return torch.optim.Adam(
        model.parameters(),
        lr=0.0,
        betas=config.adam_betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        fused=fused or None,
    )


def train_step(
    model: Transformer | DistributedDataParallel,
    optimizer: torch.optim.Optimizer,
    micro_batches: Sequence[Batch],
    lr: float,
    config: TrainConfig,
    autocast: contextlib.AbstractContextManager[object] | None = None,
    dist: DistContext | None = None,
) -> StepResult:
    """One optimizer update: accumulate gradients over micro_batches, clip, Adam step at learning rate lr."""
    optimizer.zero_grad(set_to_none=True)
    loss_sum, nll_sum, n_tokens = accumulate_gradients(model, micro_batches, config.label_smoothing, autocast, dist)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm or math.inf)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    return StepResult(loss_sum / n_tokens, nll_sum / n_tokens, float(grad_norm), n_tokens)
