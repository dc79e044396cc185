"""One optimizer update as in the paper (Sec. 5.3, 5.4): label-smoothed loss on the non-pad target positions,
gradients accumulated over micro-batches (and data-parallel ranks) per target token, clipping, Adam."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from torch import Tensor

from model.data.batching import Batch
from model.nn.out_of_memory import is_out_of_memory
from model.nn.transformer import Transformer
from model.train.config import TrainConfig, TrainingError
from model.train.linear_loss import linear_label_smoothed_loss, use_fused_linear_loss
from model.train.loader import pin_for, to_device
from model.train.loss import label_smoothed_loss
from model.train.step_graph import StepGraph

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

    from model.train.distributed import DistContext


def batch_hidden(model: Transformer, batch: Batch) -> tuple[Tensor, Tensor]:
    """(decoder outputs (N, d_model), targets (N,)) at the N non-pad target positions only. The positions come
    with the batch (found on the host), so nothing here waits for the device."""
    pad = model.config.pad_id
    src_key_padding_mask = batch.src == pad  # (B, S)
    memory = model.encode(batch.src, src_key_padding_mask)  # (B, S, d_model)
    hidden = model.decode(batch.tgt_in, memory, src_key_padding_mask)  # (B, T, d_model)
    positions = batch.target_positions
    assert positions is not None  # Batch.__post_init__ sets it
    hidden = hidden.flatten(0, 1).index_select(0, positions)  # (B*T, d_model) -> (N, d_model)
    return hidden, batch.tgt_out.flatten().index_select(0, positions)  # (N, d_model), (N,)


def batch_logits(model: Transformer, batch: Batch) -> tuple[Tensor, Tensor]:
    """(logits (N, V), targets (N,)) at the N non-pad target positions only: model(batch.src, batch.tgt_in)
    [non-pad], but the pre-softmax projection, usually the largest matrix, never runs on padding."""
    hidden, target = batch_hidden(model, batch)
    return model.project(hidden), target  # (N, V), (N,)


def eager_batch_loss(model: Transformer, batch: Batch, smoothing: float) -> tuple[Tensor, Tensor]:
    """(smoothed loss, NLL) of one micro-batch, summed over its target tokens, in the eager step (step_graph.py
    has the compiled one's): the projection and the loss fused (model/train/linear_loss.py) where
    use_fused_linear_loss says so, else the logits then the loss. Call it inside the step's autocast."""
    hidden, target = batch_hidden(model, batch)
    if use_fused_linear_loss():
        return linear_label_smoothed_loss(hidden, model.lm_head.weight, target, smoothing)
    logits = model.project(hidden)  # (N, V)
    with torch.autocast(logits.device.type, enabled=False):  # the loss picks its own float32 (loss.py)
        return label_smoothed_loss(logits, target, smoothing)


def autocast_for(device: torch.device, precision: str) -> contextlib.AbstractContextManager[object]:
    """bf16 autocast for precision "bf16", the same code on a CPU and a GPU (so the CPU tests run the GPU's
    mixed-precision path); nothing for "fp32"."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    if precision != "fp32":
        raise ValueError(f"precision={precision!r} must be 'fp32' or 'bf16'")
    return contextlib.nullcontext()


def enable_tf32(device: torch.device) -> bool:
    """On a GPU, let fp32 matrix multiplications use TF32 tensor cores (10-bit mantissa inputs, fp32 sums), as
    fairseq and Hugging Face do; returns whether it was set. CPUs have no TF32: nothing changes there."""
    if device.type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return True


def accumulate_gradients(
    model: Transformer | DistributedDataParallel,
    micro_batches: Sequence[Batch],
    smoothing: float,
    autocast: contextlib.AbstractContextManager[object] | None = None,
    dist: DistContext | None = None,
    step_graph: StepGraph | None = None,
) -> tuple[Tensor, Tensor, int]:
    """Backward over micro-batches, each scaled by the total target tokens of all of them, so the gradient
    equals that of one batch holding them all. Returns (smoothed loss sum, NLL sum, target tokens), the sums as
    float64 tensors on the device: nothing here waits for the device to read a value back.

    Data-parallel (dist, and model = dist.wrap(...)): micro_batches are this rank's share of the update; the token
    count and the sums are over all ranks, and as DDP averages the ranks' gradients each loss is scaled by
    world_size / tokens, so the gradient is again the one per target token of the whole update.

    step_graph (training.compile, without dist): each micro-batch's forward, loss and backward run as its one
    compiled graph instead."""
    n_tokens = sum(b.n_tgt_tokens for b in micro_batches)
    if dist is not None:
        n_tokens = int(dist.all_reduce_sum([n_tokens])[0])
    scale = n_tokens / (dist.world_size if dist is not None else 1)
    device = next(model.parameters()).device
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    nll_sum = torch.zeros((), dtype=torch.float64, device=device)
    # with dist, model is dist.wrap(...) (DDP around eager_batch_loss); without, the bare Transformer
    ddp = cast("DistributedDataParallel", model)
    pin = pin_for(device)
    for i, b in enumerate(micro_batches):
        b = to_device(b, device, pin)  # the trainer's come on the device already (model/train/loader.py)
        last = i == len(micro_batches) - 1  # DDP all-reduces the gradients during the last backward only
        with dist.gradient_sync(ddp, last) if dist is not None else contextlib.nullcontext():
            if step_graph is not None:
                loss, nll = step_graph(b)
            else:
                with autocast if autocast is not None else contextlib.nullcontext():
                    if dist is not None:  # DDP's forward is eager_batch_loss (the trainer wraps it)
                        loss, nll = model(b)
                    else:
                        loss, nll = eager_batch_loss(cast(Transformer, model), b, smoothing)
            (loss / scale).backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        loss_sum = loss_sum + loss.detach().double()
        nll_sum = nll_sum + nll.detach().double()
    if dist is not None:
        loss_sum, nll_sum = dist.all_reduce_sum_tensor(torch.stack([loss_sum, nll_sum])).unbind()
    return loss_sum, nll_sum, n_tokens


def to_host(*values: Tensor) -> list[float]:
    """The one place a training step reads values back from the device: one transfer (and one wait) for all."""
    return [float(v) for v in torch.stack([v.detach().double() for v in values]).cpu().tolist()]


@dataclass
class StepResult:
    loss: float  # label-smoothed cross entropy per target token
    nll_loss: float  # cross entropy per target token without smoothing
    grad_norm: float  # global L2 norm before clipping
    n_tokens: int


@dataclass
class PendingStep:
    """One update's sums, still on the device (0-dim tensors); read_steps reads many steps at once."""

    loss_sum: Tensor
    nll_sum: Tensor
    grad_norm: Tensor
    n_tokens: int


def read_steps(pending: Sequence[PendingStep]) -> list[StepResult]:
    """The steps' results, in one transfer from the device (to_host) for all of them."""
    values = to_host(*(v for p in pending for v in (p.loss_sum, p.nll_sum, p.grad_norm)))
    return [
        StepResult(values[3 * i] / p.n_tokens, values[3 * i + 1] / p.n_tokens, values[3 * i + 2], p.n_tokens)
        for i, p in enumerate(pending)
    ]


def build_optimizer(model: Transformer, config: TrainConfig) -> torch.optim.Adam:
    """Adam with the paper's beta1=0.9, beta2=0.98, eps=1e-9 (Sec. 5.3); lr is set per step by the schedule.

    Fused (one kernel for all parameters) on a GPU and on a CPU: torch's default on a CPU is a loop over the
    parameters, 16.5 ms a step for `small` at vocabulary 8000 on two cores against 5.4 ms fused (2026-12-01)."""
    fused = next(model.parameters()).device.type in ("cuda", "cpu")
    return torch.optim.Adam(
        model.parameters(),
        lr=0.0,
        betas=config.adam_betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        fused=fused or None,
    )


class BatchTooLarge(TrainingError):
    """Out of memory even with every micro-batch split MAX_OOM_SPLITS times."""


MAX_OOM_SPLITS = 3  # halvings tried after an out-of-memory error: down to 1/8 of each micro-batch


def train_step(
    model: Transformer | DistributedDataParallel,
    optimizer: torch.optim.Optimizer,
    micro_batches: Sequence[Batch],
    lr: float,
    config: TrainConfig,
    autocast: contextlib.AbstractContextManager[object] | None = None,
    dist: DistContext | None = None,
    step_graph: StepGraph | None = None,
) -> StepResult:
    """One optimizer update (update_on_device), its loss, NLL and gradient norm read back at once."""
    return read_steps([update_on_device(model, optimizer, micro_batches, lr, config, autocast, dist, step_graph)])[0]


def update_on_device(
    model: Transformer | DistributedDataParallel,
    optimizer: torch.optim.Optimizer,
    micro_batches: Sequence[Batch],
    lr: float,
    config: TrainConfig,
    autocast: contextlib.AbstractContextManager[object] | None = None,
    dist: DistContext | None = None,
    step_graph: StepGraph | None = None,
) -> PendingStep:
    """One optimizer update: accumulate gradients over micro_batches, clip, Adam step at learning rate lr.
    Nothing is read back from the device: the sums stay there (PendingStep) for read_steps.

    If the device runs out of memory, the gradients are dropped and the step runs again with every micro-batch
    split in two (accumulation keeps the update that of the unsplit batch), up to MAX_OOM_SPLITS times; then
    BatchTooLarge names the batch and a smaller training.max_tokens_per_batch. Data-parallel steps are not
    retried: the other ranks would wait in collectives this rank no longer calls in the same order."""
    batches = list(micro_batches)
    for splits in range(MAX_OOM_SPLITS + 1):
        optimizer.zero_grad(set_to_none=True)
        try:
            loss_sum, nll_sum, n_tokens = accumulate_gradients(
                model, batches, config.label_smoothing, autocast, dist, step_graph
            )
            break
        except Exception as exc:  # the traceback holds the activations: leave this block before retrying
            if not is_out_of_memory(exc):
                raise
            if dist is not None or splits == MAX_OOM_SPLITS:
                raise _too_large(micro_batches, splits, config) from exc
        optimizer.zero_grad(set_to_none=True)
        if next(iter(model.parameters())).device.type == "cuda":
            torch.cuda.empty_cache()
        batches = [half for b in batches for half in b.halves()]
        log.warning("out of memory: retrying the step with micro-batches split in %d", 2 ** (splits + 1))
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm or math.inf)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    return PendingStep(loss_sum, nll_sum, grad_norm, n_tokens)


def _too_large(micro_batches: Sequence[Batch], splits: int, config: TrainConfig) -> BatchTooLarge:
    largest = max(micro_batches, key=lambda b: b.src.numel() + b.tgt_in.numel())
    rows, src_len = largest.src.shape
    suggestion = max(32, config.max_tokens_per_batch // 2 ** max(splits, 1))
    tried = f" even split in {2**splits}" if splits else ""
    return BatchTooLarge(
        f"out of memory on a micro-batch of {rows} sentences ({rows} x {src_len} source and "
        f"{rows} x {largest.tgt_in.shape[1]} target padded tokens){tried}: training.max_tokens_per_batch="
        f"{config.max_tokens_per_batch} is too large for this device; try {suggestion} or a smaller model"
    )
