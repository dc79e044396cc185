"""The pre-softmax projection and the label-smoothed loss as one operation, a chunk of rows at a time.

The unfused step (model/train/step.py) writes every logit, (N, V) in the autocast dtype, keeps them for the
loss's backward, and writes their gradient, another (N, V), before the projection's backward reads it twice. At
a `base` batch of 25k target tokens and a 32k vocabulary that is 3.2 GB of bf16 buffers, the step's largest.

Here (as Liger's fused linear cross-entropy does, with the matrix products left to cuBLAS) each chunk of rows
goes through logits -> float32 log-softmax -> the loss's closed-form gradient (softmax - (1 - eps) onehot -
eps / V, model/train/loss.py) -> grad_hidden = g W and grad_W += g^T h, all in the forward. Only a chunk's logits
and gradient exist at any time; backward multiplies the saved grad_hidden (N, d_model) and grad_W (V, d_model) by
the loss's incoming gradient. The matrix products are the three of the unfused step (logits, d hidden, d W), so
no logit is computed twice.

The NLL output is for reporting: it has no gradient (the gradient computed ahead is the smoothed loss's).
grad_W accumulates in float32 across chunks: each chunk's product is rounded to the compute dtype once, as the
unfused backward rounds its single product.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import torch
from torch import Tensor

from model.train.loss import CHUNK_ELEMENTS

# "on": the eager single-process step fuses on every device: on a GPU the (N, V) buffers bound the batch, and on
# this 2-core CPU the step measured 2.5% faster (`small`, 4000-token batches, 8k vocabulary: 3,099 against 3,023
# tokens/s, medians of three; ratio to MarianMTModel 1.27 against 1.20). "off": logits, then the loss.
# Data-parallel steps fuse too (DDP's forward is the step's eager_batch_loss); the compiled step
# (model/train/step_graph.py) keeps its own loss, which inductor fuses.
FUSED_LINEAR_LOSS: Literal["on", "off"] = "on"


def use_fused_linear_loss() -> bool:
    """Whether the training step projects and scores with linear_label_smoothed_loss (FUSED_LINEAR_LOSS)."""
    return FUSED_LINEAR_LOSS == "on" and not torch.compiler.is_compiling()


def rows_per_chunk(vocab: int) -> int:
    """Rows whose float32 logits fit CHUNK_ELEMENTS (64 MiB): about 512 rows of a 32k vocabulary."""
    return max(1, CHUNK_ELEMENTS // max(vocab, 1))


class _LinearSmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        hidden: Tensor,
        weight: Tensor,
        target: Tensor,
        row_weight: Tensor | None,
        smoothing: float,
        chunk: int,
        dtype: torch.dtype,
    ) -> tuple[Tensor, Tensor]:
        n, vocab = hidden.shape[0], weight.shape[0]
        compute = torch.promote_types(dtype, torch.float32)
        with torch.autocast(hidden.device.type, enabled=False):  # the dtypes here are chosen, not autocast's
            h, w = hidden.to(dtype), weight.to(dtype)  # (N, d_model), (V, d_model)
            grad_hidden = torch.empty_like(h)  # (N, d_model)
            grad_weight = torch.zeros(weight.shape, dtype=compute, device=weight.device)  # (V, d_model)
            nll_rows = h.new_empty(n, dtype=compute)  # (N,) -log p(gold)
            smooth_rows = h.new_empty(n, dtype=compute)  # (N,) -sum_v log p(v) / V
            for start in range(0, n, chunk):
                rows = slice(start, start + chunk)
                lprobs = (h[rows] @ w.T).to(compute).log_softmax(dim=-1)  # (n_chunk, V)
                gold = target[rows, None]  # (n_chunk, 1)
                nll_rows[rows] = -lprobs.gather(1, gold).squeeze(1)
                smooth_rows[rows] = -lprobs.sum(dim=-1) / vocab
                g = lprobs.exp_()  # softmax, in the log-probabilities' buffer
                if smoothing:
                    g.sub_(smoothing / vocab)
                g.scatter_add_(1, gold, g.new_full(gold.shape, smoothing - 1.0))  # - (1 - eps) onehot
                if row_weight is not None:
                    g.mul_(row_weight[rows, None])
                g_chunk = g.to(dtype)  # (n_chunk, V): d loss / d logits
                grad_hidden[rows] = g_chunk @ w  # (n_chunk, d_model)
                grad_weight.add_(g_chunk.T @ h[rows])  # (V, d_model)
        if row_weight is not None:
            nll_rows, smooth_rows = nll_rows * row_weight, smooth_rows * row_weight
        nll = nll_rows.sum()
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.dtypes = (hidden.dtype, weight.dtype)
        ctx.mark_non_differentiable(nll)
        return (1.0 - smoothing) * nll + smoothing * smooth_rows.sum(), nll

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor | None) -> tuple[Tensor | None, ...]:
        grad_hidden, grad_weight = ctx.saved_tensors
        hidden_dtype, weight_dtype = ctx.dtypes
        return (
            (grad_hidden * grad_loss).to(hidden_dtype),
            (grad_weight * grad_loss).to(weight_dtype),
            None,
            None,
            None,
            None,
            None,
        )


def linear_label_smoothed_loss(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    smoothing: float,
    *,
    row_weight: Tensor | None = None,
    chunk_rows: int | None = None,
) -> tuple[Tensor, Tensor]:
    """label_smoothed_loss(hidden @ weight.T, target, smoothing) without the (N, V) logits: (smoothed loss, NLL),
    both summed over the rows (times row_weight, 0 or 1 per row, if given). hidden (N, d_model), weight
    (V, d_model) (the output projection's, bias-free), target (N,). Under autocast the products run in its dtype
    and the softmax in float32, as the unfused step's. The NLL carries no gradient."""
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(
            f"hidden {tuple(hidden.shape)} and weight {tuple(weight.shape)} must be (N, d_model) and (V, d_model)"
        )
    if target.shape != hidden.shape[:1]:
        raise ValueError(f"target {tuple(target.shape)} must be ({hidden.shape[0]},), one per row of hidden")
    chunk = chunk_rows if chunk_rows is not None else rows_per_chunk(weight.shape[0])
    if chunk < 1:
        raise ValueError(f"chunk_rows={chunk} must be >= 1")
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    if row_weight is not None:
        row_weight = row_weight.to(torch.promote_types(dtype, torch.float32))
    # apply returns forward's (loss, nll); torch leaves Function.apply unannotated
    out = _LinearSmoothedCrossEntropy.apply(  # type: ignore[no-untyped-call]
        hidden, weight, target, row_weight, smoothing, chunk, dtype
    )
    return cast(tuple[Tensor, Tensor], out)
