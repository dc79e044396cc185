"""Dropout whose CPU mask costs a quarter of the random numbers.

torch's CPU dropout draws one random number per element (bernoulli_), which on CPU training of small models
takes about a tenth of a step. Here each 64-bit random word gives four 16-bit draws, compared with
round(p * 65536): the drop rate is p to within 1/65536, the mask comes from torch's default generator (so
torch.manual_seed and saved RNG states reproduce it), and the result is scaled by 1 / (1 - p) as usual. On
other devices, or outside training, it is torch's own dropout.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LEVELS = 1 << 16


def keep_mask(shape: torch.Size, p: float) -> Tensor:
    """A bool tensor of `shape`, each element False with probability round(p * 65536) / 65536."""
    n = shape.numel()
    words = torch.randint(
        torch.iinfo(torch.int64).min, torch.iinfo(torch.int64).max, ((n + 3) // 4,), dtype=torch.int64
    )  # 4 draws per word
    draws = words.view(torch.int16)[:n]  # (n,) uniform over -32768..32767
    return (draws >= -32768 + round(p * LEVELS)).view(shape)


class _MaskedScale(torch.autograd.Function):
    # torch.where(keep, x, 0) reads the bool mask as it is; x * keep would first copy it into x's dtype, one more
    # pass over a tensor of x's size each way (forward and backward).
    @staticmethod
    def forward(ctx: Any, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.where(keep, x, 0.0).mul_(scale)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad, 0.0).mul_(ctx.scale), None, None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not 0.0 < p < 1.0 or torch.compiler.is_compiling():  # compiled: inductor's own
        return F.dropout(x, p, training)
    # apply returns forward's tensor; torch leaves Function.apply unannotated
    keep, scale = keep_mask(x.shape, p), 1.0 / (1.0 - p)
    out = _MaskedScale.apply(x, keep, scale)  # type: ignore[no-untyped-call]  # torch: untyped
    return cast(Tensor, out)


class Dropout(nn.Module):
    """nn.Dropout with the cheaper CPU mask of this module."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
