"""Label-smoothed cross entropy (Sec. 5.4) with a hand-written backward.

Autograd's version of log_softmax -> gather + sum builds the gradient from several (N, V) tensors (zeros for the
gather, the sum's expansion, their sum, log_softmax's backward); with V in the tens of thousands those passes
and their fresh allocations cost about as much as the output projection itself. The gradient has a closed form,
softmax - (1 - eps) * onehot - eps / V, which this computes in one (N, V) buffer.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor


class _SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
        lprobs = logits.log_softmax(dim=-1)  # (N, V)
        nll = -lprobs.gather(1, target[:, None]).sum()
        smooth = -lprobs.sum() / lprobs.size(-1)
        ctx.save_for_backward(lprobs, target)
        ctx.smoothing = smoothing
        ctx.mark_non_differentiable(target)
        return (1.0 - smoothing) * nll + smoothing * smooth, nll

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, grad_nll: Tensor) -> tuple[Tensor, None, None]:
        lprobs, target = ctx.saved_tensors
        eps, vocab = ctx.smoothing, lprobs.size(-1)
        # d loss/d logits = p - (1 - eps) onehot - eps / V;  d nll/d logits = p - onehot
        grad = lprobs.exp()  # (N, V) softmax: the one new buffer
        grad.mul_(grad_loss + grad_nll)
        if eps:
            grad.sub_(grad_loss * (eps / vocab))
        onehot_weight = (grad_loss * (1.0 - eps) + grad_nll).expand(target.size(0), 1)  # (N, 1)
        grad.scatter_add_(1, target[:, None], -onehot_weight)
        return grad, None, None


def label_smoothed_loss(
    logits: Tensor, target: Tensor, smoothing: float, ignore_index: int | None = None
) -> tuple[Tensor, Tensor]:
    """(label-smoothed cross entropy, NLL), both summed over the non-ignored targets (Sec. 5.4).

    logits (..., V), target (...). The smoothed target is (1 - eps) on the gold token + eps / V everywhere
    (as torch's cross_entropy(label_smoothing=eps)); computed in float32 at least, even under autocast.
    """
    if logits.dtype != torch.float64:  # bf16/fp16 logits under autocast: the softmax runs in float32
        logits = logits.float()
    logits, target = logits.flatten(0, -2), target.flatten()  # (N, V), (N,)
    if ignore_index is not None:
        keep = target != ignore_index
        logits, target = logits[keep], target[keep]
    # apply returns forward's (loss, nll); torch leaves Function.apply unannotated
    out = _SmoothedCrossEntropy.apply(logits, target, smoothing)  # type: ignore[no-untyped-call]  # torch: untyped
    return cast(tuple[Tensor, Tensor], out)
