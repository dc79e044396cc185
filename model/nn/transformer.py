"""The encoder-decoder Transformer of "Attention Is All You Need" (Sec. 3, Figure 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor, nn

from model.nn.attention import KVCache
from model.nn.config import ModelConfig
from model.nn.dropout import Dropout
from model.nn.layers import DecoderLayer, EncoderLayer, SinusoidalPositionalEncoding, to_residual_dtype


@dataclass
class DecoderCache:
    """Per-decoder-layer KV caches for step-by-step decoding; create with Transformer.new_cache().

    With a capacity the self-attention caches are static (see KVCache): the decoder reads the position of the
    step from the device tensor `position` (for the positional encoding, the cache writes and the length
    mask) and advances it itself, so a step never asks the host where it is and can be replayed as a graph.
    Static caches take one new token per call.
    """

    self_attn: list[KVCache] = field(default_factory=list)
    encoder_attn: list[KVCache] = field(default_factory=list)
    capacity: int | None = None  # static: target positions preallocated (the decoding limit)
    position: Tensor | None = None  # static: (1,) long on the device, created by the first step

    @classmethod
    def empty(cls, n_layers: int, capacity: int | None = None) -> DecoderCache:
        """capacity: target positions to preallocate in the self-attention caches (the decoding limit)."""
        return cls(
            [KVCache(capacity=capacity) for _ in range(n_layers)], [KVCache() for _ in range(n_layers)], capacity
        )

    @property
    def length(self) -> int:
        """Number of target positions already decoded (the position of the next token); grown caches only."""
        if self.capacity is not None:
            raise ValueError("a static cache keeps its length on the device (DecoderCache.position)")
        return self.self_attn[0].length if self.self_attn else 0

    def step_position(self, device: torch.device) -> Tensor:
        """The static cache's position tensor, (1,) long, created at 0 and shared by every layer's cache."""
        if self.position is None:
            self.position = torch.zeros(1, dtype=torch.long, device=device)
            for c in self.self_attn:
                c.position = self.position
        return self.position

    def unwritten(self, position: Tensor) -> Tensor:
        """Static cache: key padding mask (1, capacity), True = a position after `position`, not written yet."""
        assert self.capacity is not None  # static caches only
        return torch.arange(self.capacity, device=position.device)[None, :] > position  # (1, capacity)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` in every layer's cache (beam search)."""
        for c in self.self_attn + self.encoder_attn:
            c.reorder(index)


@dataclass
class AttentionWeights:
    """Per-layer attention weights, each (B, n_heads, T_q, T_k)."""

    encoder_self: list[Tensor]
    decoder_self: list[Tensor]
    cross: list[Tensor]


class _Stack(nn.Module):
    """Base of Encoder and Decoder: token embedding * sqrt(d_model) + positional encoding, then dropout
    (Sec. 3.4, 3.5, 5.4)."""

    def __init__(self, config: ModelConfig, embed_tokens: nn.Embedding) -> None:
        super().__init__()
        self.embed_tokens = embed_tokens
        self.embed_positions = SinusoidalPositionalEncoding(config.max_positions, config.d_model)
        self.embed_scale = math.sqrt(config.d_model)
        self.dropout = Dropout(config.dropout)

    def embed(self, ids: Tensor, offset: int | Tensor = 0) -> Tensor:
        """offset: the first position, a host int, or a (1,) device tensor for one token (a static cache)."""
        x = self.embed_tokens(ids) * self.embed_scale  # (B, T, d_model)
        if isinstance(offset, Tensor):
            positions = self.embed_positions.weight.index_select(0, offset)  # (1, d_model): no host read
        else:
            positions = self.embed_positions(ids.size(1), offset)  # (T, d_model)
        return cast(Tensor, self.dropout(to_residual_dtype(x + positions)))


class Encoder(_Stack):
    """A stack of N identical layers of self-attention + FFN (Sec. 3.1)."""

    def __init__(self, config: ModelConfig, embed_tokens: nn.Embedding) -> None:
        super().__init__(config, embed_tokens)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        # Pre-norm leaves the residual stream un-normalised, so the stack ends with a LayerNorm.
        self.layer_norm = nn.LayerNorm(config.d_model) if config.norm_first else None

    def forward(
        self, src_ids: Tensor, src_key_padding_mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """src_ids (B, S) -> memory (B, S, d_model), per-layer self-attention weights (empty unless asked)."""
        x, all_weights = self.embed(src_ids), []
        for layer in self.layers:
            x, weights = layer(x, src_key_padding_mask, need_weights)
            all_weights += [weights] if need_weights else []
        return (self.layer_norm(x) if self.layer_norm is not None else x), all_weights


class Decoder(_Stack):
    """A stack of N identical layers of masked self-attention + cross-attention + FFN (Sec. 3.1)."""

    def __init__(self, config: ModelConfig, embed_tokens: nn.Embedding) -> None:
        super().__init__(config, embed_tokens)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        self.layer_norm = nn.LayerNorm(config.d_model) if config.norm_first else None

    def forward(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        src_key_padding_mask: Tensor | None,
        tgt_key_padding_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """tgt_ids (B, T) -> hidden (B, T, d_model), self- and cross-attention weights per layer (if asked).

        With a cache, tgt_ids are only the new tokens; they are placed after the cache.length cached ones (a
        static cache: one token, at cache.position, which the call advances).
        """
        position = None
        if cache is not None and cache.capacity is not None:
            if tgt_ids.size(1) != 1:
                raise ValueError(f"a static cache takes one token per call, got {tgt_ids.size(1)}")
            position = cache.step_position(tgt_ids.device)
            tgt_key_padding_mask = cache.unwritten(position)  # (1, capacity): the positions not written yet
            x = self.embed(tgt_ids, offset=position)
        else:
            x = self.embed(tgt_ids, offset=cache.length if cache is not None else 0)
        self_weights, cross_weights = [], []
        for i, layer in enumerate(self.layers):
            x, sw, cw = layer(
                x,
                memory,
                src_key_padding_mask,
                tgt_key_padding_mask,
                self_attn_cache=cache.self_attn[i] if cache is not None else None,
                encoder_attn_cache=cache.encoder_attn[i] if cache is not None else None,
                need_weights=need_weights,
            )
            if need_weights:
                self_weights.append(sw)
                cross_weights.append(cw)
        if position is not None:
            position += 1  # in place: the next call writes the next position
        return (self.layer_norm(x) if self.layer_norm is not None else x), self_weights, cross_weights


class Transformer(nn.Module):
    """Encoder, decoder and the pre-softmax linear projection (Figure 1).

    The model exposes encode, decode and project; the searches are outside it, greedy in model/decode/greedy.py
    and beam search in model/decode/beam.py.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        V, d = config.vocab_size, config.d_model
        self.shared: nn.Embedding | None
        if config.share_embeddings:  # Sec. 3.4: one weight matrix for both embeddings and the projection
            self.shared = nn.Embedding(V, d)
            src_embed = tgt_embed = self.shared
        else:
            self.shared = None
            src_embed, tgt_embed = nn.Embedding(V, d), nn.Embedding(V, d)
        self.encoder = Encoder(config, src_embed)
        self.decoder = Decoder(config, tgt_embed)
        self.lm_head = nn.Linear(d, V, bias=False)
        if config.share_embeddings:
            assert self.shared is not None  # set above
            self.lm_head.weight = self.shared.weight
        self._init_weights()

    def _init_weights(self) -> None:
        """config.init "normal": linear and embedding weights N(0, 0.02), biases zero, as Marian and BART. Each
        sublayer then starts with outputs small beside the residual, attention logits near 0 and a loss near
        ln V, so the post-norm model trains stably at the paper's peak rate. "xavier" (fairseq): Xavier-uniform
        linears, embeddings N(0, d_model^-0.5) so that, scaled by sqrt(d_model), they have unit variance like the
        positional encodings; sublayer outputs start nearly as large as the residual, and the post-norm model
        needs a lower peak rate, except at toy widths (see PRESETS; docs/learning-efficiency.md has the runs).
        Embeddings last: when tied, lm_head.weight is the embedding matrix and keeps their initialisation."""
        normal = self.config.init == "normal"
        for module in self.modules():
            if isinstance(module, nn.Linear):
                if normal:
                    nn.init.normal_(module.weight, mean=0.0, std=0.02)
                else:
                    nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for module in self.modules():
            if isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02 if normal else self.config.d_model**-0.5)

    def new_cache(self, capacity: int | None = None) -> DecoderCache:
        return DecoderCache.empty(self.config.n_decoder_layers, capacity)

    def encode(self, src_ids: Tensor, src_key_padding_mask: Tensor | None) -> Tensor:
        """src_ids (B, S), src_key_padding_mask (B, S) bool True = pad -> memory (B, S, d_model)."""
        memory: Tensor = self.encoder(src_ids, src_key_padding_mask)[0]
        return memory

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        src_key_padding_mask: Tensor | None,
        tgt_key_padding_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """tgt_ids (B, T) -> hidden (B, T, d_model). The attention weights come from forward_with_attention."""
        hidden: Tensor = self.decoder(tgt_ids, memory, src_key_padding_mask, tgt_key_padding_mask, cache)[0]
        return hidden

    def project(self, hidden: Tensor) -> Tensor:
        """Pre-softmax linear transformation (Sec. 3.4): hidden (..., d_model) -> logits (..., vocab_size)."""
        return cast(Tensor, self.lm_head(hidden))

    def forward(self, src_ids: Tensor, tgt_in_ids: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, vocab_size) for target inputs tgt_in_ids (B, T) (BOS + shifted target).

        Source pads (config.pad_id) are masked out of every attention. Target pads need no mask: with right
        padding the causal mask already hides them from every real position, and their logits are ignored by
        the loss.
        """
        src_key_padding_mask = src_ids == self.config.pad_id  # (B, S)
        memory = self.encode(src_ids, src_key_padding_mask)
        return self.project(self.decode(tgt_in_ids, memory, src_key_padding_mask))

    def forward_with_attention(self, src_ids: Tensor, tgt_in_ids: Tensor) -> tuple[Tensor, AttentionWeights]:
        """Like forward, and also every layer's attention weights (softmax(QK^T / sqrt(d_k)), Eq. 1)."""
        src_key_padding_mask = src_ids == self.config.pad_id  # (B, S)
        memory, enc_w = self.encoder(src_ids, src_key_padding_mask, need_weights=True)
        hidden, dec_w, cross_w = self.decoder(tgt_in_ids, memory, src_key_padding_mask, need_weights=True)
        return self.project(hidden), AttentionWeights(enc_w, dec_w, cross_w)
