"""Building blocks of one encoder or decoder layer (Sec. 3.1-3.5), named like HF Marian for weight export."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.nn.attention import KVCache, MultiHeadAttention
from model.nn.config import ModelConfig
from model.nn.dropout import Dropout

ACTIVATION_FNS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}
Attended = tuple[Tensor, Tensor | None]  # an attention's output and its weights (None unless asked for)

# Under bf16 autocast, the residual stream (embeddings, layer norm outputs, residual sums) stays bf16, as in
# Megatron with bf16 parameters or fairseq --bf16; weights and Adam stay fp32. Autocast alone keeps it fp32: on
# CUDA layer_norm is an fp32 op, so each residual add then reads and writes fp32 and each linear casts its input
# again. tests/model/nn/test_residual_precision.py trains a model both ways and compares the losses.
BF16_RESIDUAL = True


def _bf16_residual(device: str) -> bool:
    """Whether the residual stream is bf16 on `device`: bf16 autocast is on there, and BF16_RESIDUAL."""
    return BF16_RESIDUAL and torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.bfloat16


def to_residual_dtype(x: Tensor) -> Tensor:
    """x in bf16 when bf16 autocast is on for its device (and BF16_RESIDUAL); else x as it is. The layer norms
    still compute in fp32 inside (autocast's policy on CUDA, opmath on the CPU)."""
    return x.to(torch.bfloat16) if _bf16_residual(x.device.type) else x


# Post-norm's LayerNorm(residual + Dropout(x)) as one Triton kernel each way (model/nn/fused_add_norm.py). "auto":
# in training on a CUDA device where Triton is installed, unless torch.compile is tracing (inductor fuses these
# itself); "on": wherever Triton runs (on a CPU, its interpreter: the tests); "off": never.
FUSED_ADD_NORM: Literal["auto", "on", "off"] = "auto"


@functools.cache
def _triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def use_fused_add_norm(x: Tensor, training: bool) -> bool:
    """Whether the end of a post-norm sub-layer runs the fused kernels for x (FUSED_ADD_NORM)."""
    if FUSED_ADD_NORM == "off" or torch.compiler.is_compiling():
        return False
    return FUSED_ADD_NORM == "on" or (training and x.is_cuda and _triton_installed())


def norm_dtype(device: str, summed: torch.dtype) -> torch.dtype:
    """The dtype the unfused path's norm(...) returns for a sum of dtype `summed` on `device`: under autocast, fp32,
    or bf16 with BF16_RESIDUAL; else the sum's."""
    if not torch.is_autocast_enabled(device):
        return summed
    return torch.bfloat16 if _bf16_residual(device) else torch.float32


class PositionWiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position separately (Sec. 3.3, Eq. 2)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.activation_fn = ACTIVATION_FNS[activation]
        self.dropout = Dropout(dropout)  # inside the FFN, as in the Annotated Transformer (t2t's relu_dropout)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return cast(Tensor, self.fc2(self.dropout(self.activation_fn(self.fc1(x)))))


class SinusoidalPositionalEncoding(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (Sec. 3.5), not learned.

    Laid out like HF MarianSinusoidalPositionalEmbedding: all sines in the first half of the vector, all cosines
    in the second half (out[p, i] = sin(p / 10000^(2i/d)), out[p, d/2 + i] = cos(...)); positions start at 0.
    Computed in float64 and rounded once, as Marian does, so the two tables agree bit for bit.
    """

    weight: Tensor  # (P, d) buffer

    def __init__(self, num_positions: int, d_model: int) -> None:
        super().__init__()
        pos = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
        j = torch.arange(d_model, dtype=torch.float64)
        angle = pos / torch.pow(10000.0, 2 * torch.div(j, 2, rounding_mode="floor") / d_model)  # (P, d)
        table = torch.cat([torch.sin(angle[:, 0::2]), torch.cos(angle[:, 1::2])], dim=1)  # (P, d)
        self.register_buffer("weight", table.float(), persistent=False)  # derived, so not in the state dict

    def forward(self, seq_len: int, offset: int = 0) -> Tensor:
        """Encodings of positions offset .. offset + seq_len - 1: (seq_len, d_model)."""
        if offset + seq_len > self.weight.size(0):
            raise ValueError(f"position {offset + seq_len - 1} exceeds max_positions={self.weight.size(0)}")
        return self.weight[offset : offset + seq_len]


class _ResidualLayer(nn.Module):
    """A layer of sub-layers, each inside a residual connection with dropout (Sec. 3.1 and 5.4):

        post-norm (the paper):  x = LayerNorm(x + Dropout(Sublayer(x)))
        pre-norm (norm_first):  x = x + Dropout(Sublayer(LayerNorm(x)))

    Each sub-layer has its own LayerNorm; the dropout module is shared, as it holds no weights.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm_first = config.norm_first
        self.dropout = Dropout(config.dropout)

    @staticmethod
    def norm(layer_norm: nn.LayerNorm, x: Tensor) -> Tensor:
        return to_residual_dtype(layer_norm(x))

    def add_norm(self, layer_norm: nn.LayerNorm, residual: Tensor, x: Tensor) -> Tensor:
        """Post-norm: LayerNorm(residual + Dropout(x)), fused where use_fused_add_norm says."""
        if not use_fused_add_norm(x, self.training):
            return self.norm(layer_norm, residual + self.dropout(x))
        from model.nn import fused_add_norm  # imports triton: only where it runs

        p = self.dropout.p if self.training else 0.0
        dtype = norm_dtype(x.device.type, torch.promote_types(x.dtype, residual.dtype))
        return fused_add_norm.add_norm(x, residual, layer_norm.weight, layer_norm.bias, p, layer_norm.eps, dtype)


class EncoderLayer(_ResidualLayer):
    """Self-attention, then the position-wise FFN (Sec. 3.1, "Encoder")."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        d = config.d_model
        self.self_attn = MultiHeadAttention(d, config.n_heads, config.attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.ffn = PositionWiseFeedForward(d, config.d_ff, config.dropout, config.activation)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(
        self, x: Tensor, src_key_padding_mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, S, d_model) -> (B, S, d_model), self-attention weights (B, n_heads, S, S) or None."""

        def self_attention(h: Tensor) -> Attended:
            return cast(Attended, self.self_attn(h, key_padding_mask=src_key_padding_mask, need_weights=need_weights))

        if self.norm_first:
            attended, weights = self_attention(self.norm(self.self_attn_layer_norm, x))
            x = x + self.dropout(attended)
            x = x + self.dropout(self.ffn(self.norm(self.final_layer_norm, x)))
        else:
            attended, weights = self_attention(x)
            x = self.add_norm(self.self_attn_layer_norm, x, attended)
            x = self.add_norm(self.final_layer_norm, x, self.ffn(x))
        return x, weights


class DecoderLayer(_ResidualLayer):
    """Masked self-attention, cross-attention over the encoder output, then the FFN (Sec. 3.1, "Decoder")."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        d = config.d_model
        self.self_attn = MultiHeadAttention(d, config.n_heads, config.attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = MultiHeadAttention(d, config.n_heads, config.attention_dropout)
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.ffn = PositionWiseFeedForward(d, config.d_ff, config.dropout, config.activation)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_key_padding_mask: Tensor | None,
        tgt_key_padding_mask: Tensor | None = None,
        self_attn_cache: KVCache | None = None,
        encoder_attn_cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model), self weights, cross weights."""

        def self_attention(h: Tensor) -> Attended:
            result = self.self_attn(
                h, key_padding_mask=tgt_key_padding_mask, causal=True, cache=self_attn_cache, need_weights=need_weights
            )
            return cast(Attended, result)

        def cross_attention(h: Tensor) -> Attended:
            result = self.encoder_attn(
                h, memory, key_padding_mask=src_key_padding_mask, cache=encoder_attn_cache, need_weights=need_weights
            )
            return cast(Attended, result)

        if self.norm_first:
            attended, self_weights = self_attention(self.norm(self.self_attn_layer_norm, x))
            x = x + self.dropout(attended)
            attended, cross_weights = cross_attention(self.norm(self.encoder_attn_layer_norm, x))
            x = x + self.dropout(attended)
            x = x + self.dropout(self.ffn(self.norm(self.final_layer_norm, x)))
        else:
            attended, self_weights = self_attention(x)
            x = self.add_norm(self.self_attn_layer_norm, x, attended)
            attended, cross_weights = cross_attention(x)
            x = self.add_norm(self.encoder_attn_layer_norm, x, attended)
            x = self.add_norm(self.final_layer_norm, x, self.ffn(x))
        return x, self_weights, cross_weights
