"""The attention projections' concatenated weights built once per decode, not at every call.

MultiHeadAttention runs Q/K/V (self-attention) and K/V (cross-attention) as one matrix product on a GPU, on the
concatenation of its three (two) weight matrices; outside a decode that concatenation is made at every call (a
copy of 3 d_model^2 weights per layer and step), as training needs it in the autograd graph. A decode's weights
do not change, so inside this context each attention module holds its concatenations, built once, in the dtype
autocast would run them in (so autocast does not cast them again at every call).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from model.nn.attention import MultiHeadAttention


def fuses(module: MultiHeadAttention, device: torch.device) -> bool:
    """Whether the module runs its projections fused on `device` (MultiHeadAttention._project's rule)."""
    return device.type == "cuda" if module.fuse_projections is None else module.fuse_projections


def compiled(model: nn.Module) -> bool:
    """Whether any of the model's modules runs a compiled forward (model/nn/compile.py)."""
    return any("forward" in m.__dict__ for m in model.modules())


@contextlib.contextmanager
def fused_weights(model: nn.Module, device: torch.device) -> Iterator[None]:
    """Inside the block every attention module of `model` that fuses its projections on `device` uses weights
    concatenated once here. Leaves compiled layers alone (a new tensor attribute per decode would make the
    compiler recompile). Call under torch.inference_mode (the concatenations carry no gradient)."""
    if compiled(model):
        yield
        return
    dtype = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else None
    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention) and fuses(m, device)]
    for m in modules:
        qkv, kv = (m.q_proj, m.k_proj, m.v_proj), (m.k_proj, m.v_proj)
        m.fused_weights = {
            len(group): (
                torch.cat([p.weight for p in group]).to(dtype or m.q_proj.weight.dtype),  # (n * d_model, d_model)
                torch.cat([p.bias for p in group]).to(dtype or m.q_proj.bias.dtype),  # (n * d_model,)
            )
            for group in (qkv, kv)
        }
    try:
        yield
    finally:
        for m in modules:
            m.fused_weights = None
