"""Multi-head scaled dot-product attention (Sec. 3.2, Eq. 1) with an optional KV cache."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class KVCache:
    """Keys and values one attention module has already computed, for incremental decoding.

    Self-attention adds the new step's keys/values on every call; cross-attention fills it once from the
    encoder output (memory), with its mask, and reuses both afterwards.

    Two ways to hold the self-attention's past:
    - grown (capacity None): each step concatenates (a copy of the whole past); key and value hold exactly
      the positions decoded, so no mask is needed. Faster on a CPU (docs/gpu.md).
    - static (capacity and position set, by DecoderCache): zeroed buffers of `capacity` positions, allocated
      on the first call; each call writes one position in place, at the device tensor `position`, and the
      attention runs over all `capacity` positions with the not yet written ones masked (DecoderCache's
      length mask). Shapes and addresses never change from step to step, and no step needs the host to know
      the position: what a CUDA graph needs. Zeros, not empty memory: a NaN behind the mask would still
      reach the output (0 * NaN).
    """

    key: Tensor | None = None  # (B, n_heads, T_past or capacity, d_k)
    value: Tensor | None = None  # (B, n_heads, T_past or capacity, d_k)
    capacity: int | None = None  # static: positions preallocated; None: grow by concatenation
    position: Tensor | None = None  # static: (1,) long on the device, the position the next call writes
    mask: Tensor | None = None  # cross-attention: keep-mask (B, 1, 1, T_k) built with the keys, reused
    _order: Tensor | None = None  # grown cache: rows to take at the next append (reorder(at_append=True))

    @property
    def length(self) -> int:
        """Positions held (grown cache); a static cache holds its capacity, written or not."""
        return 0 if self.key is None else self.key.size(2)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add T_new positions (B, n_heads, T_new, d_k) after the cached ones; returns all keys and values
        ((B, n_heads, capacity, d_k) each for a static cache, whose caller masks the unwritten positions)."""
        if self.position is None or self.capacity is None:
            if self.key is not None:
                assert self.value is not None  # key and value are set together
                k, v = self._grow(self.key, k), self._grow(self.value, v)  # (B, n_heads, T_past + T_new, d_k)
                self._order = None
            self.key, self.value = k, v
            return k, v
        if k.size(2) != 1:
            raise ValueError(f"a static KV cache takes one position per call, got {k.size(2)}")
        if self.key is None or self.key.shape[:2] != k.shape[:2] or self.key.dtype != k.dtype:
            shape = (k.size(0), k.size(1), self.capacity, k.size(3))  # (B, n_heads, capacity, d_k)
            self.key, self.value = k.new_zeros(shape), v.new_zeros(shape)
        assert self.value is not None  # key and value are set together
        self.key.index_copy_(2, self.position, k)  # in place, at the device's position: no host read
        self.value.index_copy_(2, self.position, v)
        return self.key, self.value

    def _grow(self, past: Tensor, new: Tensor) -> Tensor:
        """past's rows (self._order, if any) followed by new along the positions, in one copy."""
        if self._order is None:
            return torch.cat([past, new], dim=2)
        T = past.size(2)
        out = new.new_empty(self._order.numel(), new.size(1), T + new.size(2), new.size(3))
        torch.index_select(past, 0, self._order, out=out[:, :, :T])  # written in place, strided
        out[:, :, T:] = new
        return out

    def reorder(self, index: Tensor, at_append: bool = False) -> None:
        """Keep rows `index` of the batch (beam search: follow the surviving hypotheses). A static cache
        keeping its number of rows is reordered in place, so its buffers keep their addresses. at_append: a
        grown cache takes the rows at its next append, in the same copy (key and value are stale until then);
        for self-attention caches only, which the next call appends to."""
        if self.mask is not None and self.mask.size(0) > 1:
            self.mask = self.mask.index_select(0, index)
        if self.key is None:
            return
        assert self.value is not None  # key and value are set together
        if self._order is not None:  # a reorder still pending: compose the two
            index, self._order = self._order.index_select(0, index), None
        if at_append and self.position is None:
            self._order = index
            return
        if self.position is not None and index.numel() == self.key.size(0):
            self.key.copy_(self.key.index_select(0, index))  # the read is a copy: safe in place
            self.value.copy_(self.value.index_select(0, index))
        else:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


def attention_mask(
    t_q: int, t_k: int, key_padding_mask: Tensor | None, causal: bool, device: torch.device
) -> Tensor | None:
    """Boolean mask, True = may attend: (B or 1, 1, T_q, T_k), or None when nothing is masked.

    key_padding_mask is (B, T_k) with True = pad. The causal mask is aligned bottom-right, so with a KV cache
    the T_q new queries are the last T_q positions and see every earlier key (Sec. 3.2.3, "prevent leftward
    information flow").
    """
    mask = None
    if causal and t_q > 1:
        mask = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)  # (T_q, T_k)
        mask = mask[None, None]  # (1, 1, T_q, T_k)
    if key_padding_mask is not None:
        keep = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, T_k)
        mask = keep if mask is None else mask & keep  # (B, 1, T_q, T_k)
    return mask


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W_O, head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i) (Sec. 3.2.2).

    q_proj, k_proj, v_proj, out_proj are W_Q, W_K, W_V, W_O for all heads at once (with biases, as in HF Marian).
    They stay separate parameters under the names Marian and CTranslate2 use (checkpoints and exports keep
    them); on a GPU they run fused: self-attention projects Q, K and V with one matrix multiplication,
    cross-attention K and V with one (see _project). On a CPU they run apart: there the copy of the concatenated
    weights that every call makes cost more than the one product saved (docs/gpu.md). fuse_projections overrides.
    A decode concatenates them once instead (fused_weights, set by model/decode/fused_weights.py).
    """

    fuse_projections: bool | None = None  # None: fused on a GPU only
    # The concatenated weights and biases, by number of projections (3: Q/K/V, 2: K/V), when built once for a
    # whole decode (model.decode.fused_weights) rather than at every call; None outside one.
    fused_weights: dict[int, tuple[Tensor, Tensor]] | None = None

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout  # on the attention weights
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _project(self, x: Tensor, *projections: nn.Linear) -> tuple[Tensor, ...]:
        """x through several of the projections as one matrix multiplication: their weights concatenated,
        (n * d_model, d_model), so one GEMM (one kernel launch, a larger and more efficient product) replaces n.
        Returns one (B, T, d_model) view per projection."""
        fused = self.fused_weights.get(len(projections)) if self.fused_weights is not None else None
        if fused is not None:  # built once for this decode
            weight, bias = fused
        elif not (x.is_cuda if self.fuse_projections is None else self.fuse_projections):
            return tuple(p(x) for p in projections)
        else:
            weight = torch.cat([p.weight for p in projections])  # (n * d_model, d_model)
            bias = torch.cat([p.bias for p in projections])  # (n * d_model,)
        return F.linear(x, weight, bias).chunk(len(projections), dim=-1)  # n x (B, T, d_model)

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, n_heads, T, d_k)

    def _queries_keys_values(
        self, hidden_states: Tensor, key_value_states: Tensor | None, cache: KVCache | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Q for this call, K and V read from / written to the cache: (B, n_heads, T_q or T_k, d_k) each."""
        if key_value_states is None:  # self-attention: Q, K, V of the new positions in one product
            q, k, v = (
                self._split_heads(t) for t in self._project(hidden_states, self.q_proj, self.k_proj, self.v_proj)
            )
        else:
            q = self._split_heads(self.q_proj(hidden_states))  # (B, n_heads, T_q, d_k)
            if cache is not None and cache.key is not None:
                assert cache.value is not None  # key and value are set together
                return q, cache.key, cache.value  # cross-attention: memory was projected on the first step
            k, v = (self._split_heads(t) for t in self._project(key_value_states, self.k_proj, self.v_proj))
        if cache is not None:
            if key_value_states is None:  # self-attention: append the new steps
                k, v = cache.append(k, v)  # (B, n_heads, T_past + T_new, d_k) each
            else:
                cache.key, cache.value = k, v
        return q, k, v

    def forward(
        self,
        hidden_states: Tensor,
        key_value_states: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from hidden_states (B, T_q, d_model) to key_value_states (B, T_k, d_model).

        key_value_states=None means self-attention. key_padding_mask (B, T_k) covers all keys, cached ones
        included. Returns (output (B, T_q, d_model), weights (B, n_heads, T_q, T_k) or None).
        """
        B, T_q, _ = hidden_states.shape
        q, k, v = self._queries_keys_values(hidden_states, key_value_states, cache)  # (B, n_heads, T, d_k) each
        cross_cache = cache if key_value_states is not None and cache is not None else None
        if cross_cache is not None and cross_cache.mask is not None:
            mask: Tensor | None = cross_cache.mask  # built on the first step, with the keys
        else:
            mask = attention_mask(T_q, k.size(2), key_padding_mask, causal, q.device)
            if cross_cache is not None:
                cross_cache.mask = mask
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:  # Eq. 1 written out, so the weights can be returned
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, n_heads, T_q, T_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            if mask is not None:  # a fully masked row is NaN after softmax; attend to nothing instead, like SDPA
                weights = weights.masked_fill(~mask, 0.0)
            out = F.dropout(weights, dropout_p, self.training) @ v  # (B, n_heads, T_q, d_k)
        elif causal and key_padding_mask is None and T_q == k.size(2):  # lets SDPA pick a fused causal kernel
            weights = None
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)  # (B, n_heads, T_q, d_k)
        else:
            weights = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # (B, n_heads, T_q, d_k)
        out = out.transpose(1, 2).reshape(B, T_q, self.n_heads * self.d_k)  # (B, T_q, d_model)
        return self.out_proj(out), weights
