"""Label-smoothed cross entropy (Sec. 5.4) with a hand-written backward, in chunks of rows.

Autograd's version of log_softmax -> gather + sum builds the gradient from several (N, V) tensors (zeros for the
gather, the sum's expansion, their sum, log_softmax's backward); with V in the tens of thousands those passes
and their fresh allocations cost about as much as the output projection itself. The gradient has a closed form,
softmax - (1 - eps) * onehot - eps / V, which this writes into one (N, V) buffer of the logits' dtype.

Under bf16 autocast the logits are bf16, and the softmax must run in float32. Upcasting all of them at once
(`logits.float()`) made an fp32 copy of every logit, twice the size of the logits themselves, and the saved
log-probabilities another. Here the rows go through float32 a chunk at a time (CHUNK_ELEMENTS logits): the
forward keeps only per-row sums, the backward recomputes each chunk's softmax from the saved logits and writes its
gradient in their dtype. With float32 or float64 logits nothing needs a copy, so all rows are one chunk: the
CPU path does the same passes as before.

The eager training step on a GPU goes further: model/train/linear_loss.py fuses this loss with the output
projection a chunk of rows at a time, so no (N, V) logits are written at all.
Inside the compiled step (model/train/step_graph.py) inductor fuses this function's chunks as it fuses the rest.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor

CHUNK_ELEMENTS = 1 << 24  # fp32 logits per chunk when upcasting: 64 MiB (about 450 rows of a 37k vocabulary)


def rows_per_chunk(logits: Tensor) -> int:
    """Rows per chunk: all of them when the logits are already float32 or wider (there is no copy to bound)."""
    n, vocab = logits.shape
    if logits.dtype in (torch.float32, torch.float64):
        return max(n, 1)
    return max(1, CHUNK_ELEMENTS // max(vocab, 1))


def _compute_dtype(logits: Tensor) -> torch.dtype:
    return torch.promote_types(logits.dtype, torch.float32)


def _row_chunks(n: int, chunk: int) -> list[slice]:
    """The chunks' rows. Inside torch.compile, one: the row count can be symbolic (a Python loop over it would
    fix it), and inductor fuses the float32 upcast into the reductions and the gradient's pointwise kernel, so no
    float32 (N, V) buffer is written there either."""
    if torch.compiler.is_compiling():
        return [slice(None)]
    return [slice(start, start + chunk) for start in range(0, n, chunk)]


class _SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, logits: Tensor, target: Tensor, weight: Tensor | None, smoothing: float, chunk: int
    ) -> tuple[Tensor, Tensor]:
        n, vocab = logits.shape
        compute = _compute_dtype(logits)
        nll_rows = logits.new_empty(n, dtype=compute)  # (N,) -log p(gold)
        smooth_rows = logits.new_empty(n, dtype=compute)  # (N,) -sum_v log p(v) / V
        lprobs = logits
        chunks = _row_chunks(n, chunk)
        for rows in chunks:
            lprobs = logits[rows].to(compute).log_softmax(dim=-1)  # (n_chunk, V): the one float32 buffer
            nll_rows[rows] = -lprobs.gather(1, target[rows, None]).squeeze(1)
            smooth_rows[rows] = -lprobs.sum(dim=-1) / vocab
        if weight is not None:  # 0 on ignored rows (padding), 1 elsewhere
            nll_rows, smooth_rows = nll_rows * weight, smooth_rows * weight
        nll = nll_rows.sum()
        # One chunk of float32 logits (the CPU path): keep the log-probabilities, no larger than the logits, so
        # the backward's softmax is one exp (12% faster on the CPU than a softmax from the logits: 4000 x 8000).
        ctx.saved_lprobs = len(chunks) == 1 and logits.dtype == compute
        ctx.save_for_backward(lprobs if ctx.saved_lprobs else logits, target, weight)
        ctx.smoothing, ctx.chunk = smoothing, chunk
        ctx.mark_non_differentiable(target)
        return (1.0 - smoothing) * nll + smoothing * smooth_rows.sum(), nll

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, grad_nll: Tensor) -> tuple[Tensor, None, None, None, None]:
        logits, target, weight = ctx.saved_tensors  # logits, or their log-probabilities (saved_lprobs)
        eps, chunk = ctx.smoothing, ctx.chunk
        n, vocab = logits.shape
        compute = _compute_dtype(logits)
        # d loss/d logits = p - (1 - eps) onehot - eps / V;  d nll/d logits = p - onehot (per row, times its weight)
        softmax_scale = grad_loss + grad_nll
        uniform = grad_loss * (eps / vocab)
        onehot = grad_loss * (1.0 - eps) + grad_nll
        if n == 0:
            return torch.zeros_like(logits), None, None, None, None
        chunks = _row_chunks(n, chunk)
        grad = None if len(chunks) == 1 else torch.empty_like(logits)  # one chunk: its buffer is the gradient
        for rows in chunks:
            g = logits.exp() if ctx.saved_lprobs else logits[rows].to(compute).softmax(dim=-1)  # (n_chunk, V)
            if torch.compiler.is_compiling():  # pointwise, so inductor fuses it all into one kernel
                gold = torch.arange(vocab, device=g.device) == target[rows, None]  # (n_chunk, V)
                g = g * softmax_scale - uniform - torch.where(gold, onehot, 0.0)
            else:  # in place on the one buffer
                g.mul_(softmax_scale)
                if eps:
                    g.sub_(uniform)
                g.scatter_add_(1, target[rows, None], -onehot.expand(g.size(0), 1))
            if weight is not None:
                g = g * weight[rows, None] if torch.compiler.is_compiling() else g.mul_(weight[rows, None])
            if grad is None:
                return g.to(logits.dtype), None, None, None, None
            grad[rows] = g  # cast to the logits' dtype
        assert grad is not None  # n > chunk
        return grad, None, None, None, None


def label_smoothed_loss(
    logits: Tensor,
    target: Tensor,
    smoothing: float,
    ignore_index: int | None = None,
    *,
    weight: Tensor | None = None,
    chunk_rows: int | None = None,
) -> tuple[Tensor, Tensor]:
    """(label-smoothed cross entropy, NLL), both summed over the non-ignored targets (Sec. 5.4).

    logits (..., V), target (...). The smoothed target is (1 - eps) on the gold token + eps / V everywhere
    (as torch's cross_entropy(label_smoothing=eps)); computed in float32 at least, even on bf16 logits, and the
    gradient comes back in the logits' dtype. weight (...), 0 or 1 per target: ignores targets without
    selecting rows (no data-dependent shape, for a compiled graph); ignore_index: the same for targets equal to
    it. chunk_rows overrides rows_per_chunk.
    """
    logits, target = logits.flatten(0, -2), target.flatten()  # (N, V), (N,)
    if ignore_index is not None:
        keep = target != ignore_index  # (N,)
        weight = keep if weight is None else weight * keep
        target = target.masked_fill(~keep, 0)  # any index the gather can read: the row's weight is 0
    if weight is not None:
        weight = weight.flatten().to(_compute_dtype(logits))  # (N,)
    chunk = chunk_rows if chunk_rows is not None else rows_per_chunk(logits)
    if chunk < 1:
        raise ValueError(f"chunk_rows={chunk} must be >= 1")
    # apply returns forward's (loss, nll); torch leaves Function.apply unannotated
    out = _SmoothedCrossEntropy.apply(logits, target, weight, smoothing, chunk)  # type: ignore[no-untyped-call]
    return cast(tuple[Tensor, Tensor], out)
