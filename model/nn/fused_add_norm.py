"""The end of a post-norm sub-layer, y = LayerNorm(residual + Dropout(x)), as one Triton kernel each way.

Unfused, PyTorch reads and writes the activation once for dropout (and stores its mask), once for the add, and twice
for the layer norm, forward and again backward: at `d_model` 512 most of a step is such memory traffic between the
matrix products (docs/gpu.md). Here one program per row reads x and the residual once and writes the sum and the
output; the dropout mask is never stored: it is drawn from a seed and each element's index (Philox, `tl.rand`, as
fused attention draws its own), and backward draws it again. Backward reads dy, the sum and the row's mean and
1/std, and writes dx, d(residual) and, per block of rows, partial sums of the weight's and bias's gradients.

The seed comes from torch's default (CPU) generator, so `torch.manual_seed` repeats the masks and drawing it reads
nothing back from the GPU. Statistics are computed in fp32 whatever the inputs' dtype. On a CPU the same kernels
run under Triton's interpreter (TRITON_INTERPRET=1, set before triton is imported): the tests compare them there
with the unfused path, gradients and dropout included (tests/model/nn/test_fused_add_norm.py).
"""

from __future__ import annotations

from typing import Any, cast

import torch
import triton
import triton.language as tl
from torch import Tensor

SEED_RANGE = 2**31 - 1


@triton.jit(do_not_specialize=["seed"])
def _forward(X, R, W, B, Y, H, Mean, Rstd, seed, n_cols, p, eps, BLOCK: tl.constexpr, DROPOUT: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    offsets = row * n_cols + cols  # the element's index: also the dropout draw's counter
    x = tl.load(X + offsets, mask=inside, other=0.0).to(tl.float32)
    r = tl.load(R + offsets, mask=inside, other=0.0).to(tl.float32)
    if DROPOUT:
        keep = tl.rand(seed, offsets) >= p
        x = tl.where(keep, x / (1.0 - p), 0.0)
    h = r + x
    h = h.to(H.dtype.element_ty).to(tl.float32)  # normalise the sum as stored, as the unfused path does
    mean = tl.sum(h, axis=0) / n_cols
    centred = tl.where(inside, h - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=0) / n_cols + eps)
    w = tl.load(W + cols, mask=inside, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=inside, other=0.0).to(tl.float32)
    tl.store(H + offsets, h.to(H.dtype.element_ty), mask=inside)
    tl.store(Y + offsets, (centred * rstd * w + b).to(Y.dtype.element_ty), mask=inside)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)


@triton.jit(do_not_specialize=["seed"])
def _backward(
    DY, H, W, Mean, Rstd, DX, DR, DW, DB, seed, n_rows, n_cols, p,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, DROPOUT: tl.constexpr,
):  # fmt: skip
    program = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    w = tl.load(W + cols, mask=inside, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, ROWS):
        row = program * ROWS + i
        real = row < n_rows  # the last program's block may run past the last row: it reads zeros, stores nothing
        here = inside & real
        offsets = row * n_cols + cols
        dy = tl.load(DY + offsets, mask=here, other=0.0).to(tl.float32)
        h = tl.load(H + offsets, mask=here, other=0.0).to(tl.float32)
        mean = tl.load(Mean + row, mask=real, other=0.0)
        rstd = tl.load(Rstd + row, mask=real, other=0.0)
        x_hat = tl.where(here, (h - mean) * rstd, 0.0)
        w_dy = w * dy
        # d(LayerNorm)/dh: (w dy - mean(w dy) - x_hat mean(x_hat w dy)) / std
        dh = (w_dy - tl.sum(w_dy, axis=0) / n_cols - x_hat * (tl.sum(x_hat * w_dy, axis=0) / n_cols)) * rstd
        dw += dy * x_hat
        db += dy
        tl.store(DR + offsets, dh.to(DR.dtype.element_ty), mask=here)
        if DROPOUT:
            keep = tl.rand(seed, offsets) >= p
            dh = tl.where(keep, dh / (1.0 - p), 0.0)
        tl.store(DX + offsets, dh.to(DX.dtype.element_ty), mask=here)
    tl.store(DW + program * n_cols + cols, dw, mask=inside)
    tl.store(DB + program * n_cols + cols, db, mask=inside)


@triton.jit(do_not_specialize=["seed"])
def _keep(KEEP, seed, n, p, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(KEEP + offsets, (tl.rand(seed, offsets) >= p).to(tl.int8), mask=offsets < n)


def keep_mask(seed: int, shape: torch.Size, p: float, device: torch.device) -> Tensor:
    """The dropout mask the kernels draw for `seed` over a tensor of `shape` (True: kept): for tests and probes."""
    n = shape.numel()
    keep = torch.empty(n, dtype=torch.int8, device=device)
    _keep[(triton.cdiv(n, 1024),)](keep, seed, n, p, BLOCK=1024)
    return keep.bool().view(shape)


def _block(n_cols: int) -> tuple[int, int]:
    """The row's block (a power of two) and the warps a program runs with."""
    block = int(triton.next_power_of_2(n_cols))
    return block, min(max(block // 256, 1), 8)


def _rows_per_program(device: torch.device, n_rows: int) -> int:
    """Backward's rows a program (a power of two: a constant of the kernel, so a few compilations in all), for about
    four programs per streaming multiprocessor, each summing the weight gradients of its rows."""
    units = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 2
    return int(triton.next_power_of_2(triton.cdiv(n_rows, 4 * units)))


class _AddNorm(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, p: float, eps: float, seed: int,
        out_dtype: torch.dtype,
    ) -> Tensor:  # fmt: skip
        n_cols = x.shape[-1]
        x2 = x.reshape(-1, n_cols).contiguous()  # (rows, d_model)
        r2 = residual.reshape(-1, n_cols).contiguous()
        n_rows = x2.shape[0]
        h = torch.empty_like(x2, dtype=torch.promote_types(x.dtype, residual.dtype))
        y = torch.empty_like(x2, dtype=out_dtype)
        mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        rstd = torch.empty_like(mean)
        block, warps = _block(n_cols)
        dropout = p > 0.0
        _forward[(n_rows,)](
            x2, r2, weight, bias, y, h, mean, rstd, seed, n_cols, p, eps, BLOCK=block, DROPOUT=dropout, num_warps=warps
        )
        ctx.save_for_backward(h, weight, mean, rstd)
        ctx.facts = (p, seed, x.dtype, residual.dtype, x.shape)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        h, weight, mean, rstd = ctx.saved_tensors
        p, seed, x_dtype, residual_dtype, shape = ctx.facts
        n_rows, n_cols = h.shape
        dy2 = dy.reshape(n_rows, n_cols).contiguous()  # (rows, d_model)
        dx = torch.empty_like(h, dtype=x_dtype)
        dr = torch.empty_like(h, dtype=residual_dtype)
        rows = _rows_per_program(h.device, n_rows)
        programs = triton.cdiv(n_rows, rows)
        dw = torch.empty((programs, n_cols), dtype=torch.float32, device=h.device)
        db = torch.empty_like(dw)
        block, warps = _block(n_cols)
        _backward[(programs,)](
            dy2, h, weight, mean, rstd, dx, dr, dw, db, seed, n_rows, n_cols, p,
            BLOCK=block, ROWS=rows, DROPOUT=p > 0.0, num_warps=warps,
        )  # fmt: skip
        grads = (dx.view(shape), dr.view(shape), dw.sum(0).to(weight.dtype), db.sum(0).to(weight.dtype))
        return (*grads, None, None, None, None)


def add_norm(
    x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, p: float, eps: float, out_dtype: torch.dtype,
    seed: int | None = None,
) -> Tensor:  # fmt: skip
    """LayerNorm(residual + Dropout_p(x)) with the layer norm's weight and bias, in `out_dtype`; p = 0 outside
    training. `seed` picks the dropout mask (default: drawn from torch's generator)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if x.shape != residual.shape or x.shape[-1:] != weight.shape:
        raise ValueError(
            f"shapes differ: x {tuple(x.shape)}, residual {tuple(residual.shape)}, weight {tuple(weight.shape)}"
        )
    if seed is None:
        seed = int(torch.randint(SEED_RANGE, (1,)).item()) if p > 0.0 else 0  # a CPU tensor: no device sync
    out = _AddNorm.apply(x, residual, weight, bias, p, eps, seed, out_dtype)  # type: ignore[no-untyped-call]
    return cast(Tensor, out)
