"""The beam search's state as device tensors, and one step of the search on it (model/decode/beam.py drives it).

A step reads nothing back to the host: no .item(), .tolist(), bool(tensor), nonzero or boolean-mask indexing.
Every sentence keeps its rows until the host compacts the batch (a CPU only choice), so from the second step on
every tensor keeps its shape, and the ones the step writes are written in place: the step can be captured as a
CUDA graph (model/decode/step_graph.py). A sentence that is done stays in the batch, computed and ignored: its
`done` flag keeps it from adding hypotheses.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from model.nn.config import ModelConfig
from model.nn.transformer import DecoderCache, Transformer


@dataclass
class Finished:
    """Each sentence's finished hypotheses (and, at its maximum length, its cut live ones) in the order they were
    added, in 2K slots per sentence (at most K that end in </s>, then at most K cut), plus one scratch slot
    where refused writes land (a static shape has no room to skip them)."""

    tokens: Tensor  # (B, 2K + 1, L) long: generated tokens (no <s>, no </s>), junk after the length
    log_prob: Tensor  # (B, 2K + 1) float32: summed log-probabilities, </s> included when ended
    length: Tensor  # (B, 2K + 1) long: what the length penalty counts (the </s> included when ended)
    ended: Tensor  # (B, 2K + 1) bool: ended with </s>; False when cut at the maximum length
    count: Tensor  # (B,) long: slots used

    @classmethod
    def empty(cls, B: int, K: int, L: int, device: torch.device) -> Finished:
        slots = 2 * K + 1
        return cls(
            torch.zeros(B, slots, L, dtype=torch.long, device=device),
            torch.zeros(B, slots, device=device),
            torch.zeros(B, slots, dtype=torch.long, device=device),
            torch.zeros(B, slots, dtype=torch.bool, device=device),
            torch.zeros(B, dtype=torch.long, device=device),
        )

    def add(self, take: Tensor, tokens: Tensor, log_prob: Tensor, length: Tensor, ended: bool, limit: int) -> None:
        """Add the hypotheses where take (B, n) is True, in order, while a sentence has fewer than `limit`.
        tokens (B, n, L), log_prob (B, n), length (1,): the same for all."""
        scratch = self.log_prob.size(1) - 1
        slot = self.count[:, None] + take.long().cumsum(dim=1) - 1  # (B, n): the slot each would take
        take = take & (slot < limit)
        slot = torch.where(take, slot, scratch)  # (B, n)
        self.tokens.scatter_(1, slot[:, :, None].expand_as(tokens), tokens)
        self.log_prob.scatter_(1, slot, log_prob)
        self.length.scatter_(1, slot, length.expand_as(slot))
        self.ended.scatter_(1, slot, torch.full_like(take, ended))
        self.count += take.sum(dim=1)

    def select(self, index: Tensor) -> Finished:
        """The sentences `index` (B',)."""
        tokens, log_prob, length, ended, count = (
            t.index_select(0, index) for t in (self.tokens, self.log_prob, self.length, self.ended, self.count)
        )
        return Finished(tokens, log_prob, length, ended, count)


@dataclass
class Consts:
    """What every step reuses, built once per search (no tensor is made from host values inside a step)."""

    K: int
    eos_id: int
    min_len: int
    bias: Tensor  # (V,) float32: -inf on the ids never emitted, 0 elsewhere
    bias_no_eos: Tensor  # (V,) the same, </s> forbidden too (before min_len tokens)
    rank: Tensor  # (2K,) long

    @classmethod
    def build(cls, cfg: ModelConfig, K: int, min_len: int, banned: list[int], device: torch.device) -> Consts:
        bias = torch.zeros(cfg.vocab_size, device=device)  # (V,)
        bias[banned] = float("-inf")
        bias_no_eos = bias.clone()
        bias_no_eos[cfg.eos_id] = float("-inf")
        return cls(K, cfg.eos_id, min_len, bias, bias_no_eos, torch.arange(2 * K, device=device))


@dataclass
class BeamState:
    """b sentences with k live hypotheses each, row = sentence * k + beam (k is 1 before the first step)."""

    tokens: Tensor  # (b * k, L + 1) long: <s>, then the generated tokens; pad after the step
    scores: Tensor  # (b, k) float32: summed log-probabilities of the live hypotheses
    t: Tensor  # (1,) long: tokens generated so far (the step)
    max_lens: Tensor  # (b,) long: each sentence's maximum length, </s> included
    done: Tensor  # (b,) bool: the sentence has its hypotheses; its rows are computed and ignored
    sentence: Tensor  # (b,) long: each sentence's index in the request (compaction moves them)
    finished: Finished
    memory: Tensor  # (b * k, S, d_model)
    src_key_padding_mask: Tensor | None  # (b * k, S), None when no sentence has padding
    cache: DecoderCache | None

    @property
    def k(self) -> int:
        return self.scores.size(1)

    def select(self, keep: Tensor) -> None:
        """Keep the sentences `keep` (b',) and drop the others from every tensor (CPU compaction)."""
        k = self.k
        rows = (keep[:, None] * k + torch.arange(k, device=keep.device)).view(-1)  # (b' * k,)
        self.tokens, self.scores = self.tokens.index_select(0, rows), self.scores.index_select(0, keep)
        self.max_lens, self.done = self.max_lens.index_select(0, keep), self.done.index_select(0, keep)
        self.sentence, self.finished = self.sentence.index_select(0, keep), self.finished.select(keep)
        self.memory = self.memory.index_select(0, rows)
        if self.src_key_padding_mask is not None:
            self.src_key_padding_mask = self.src_key_padding_mask.index_select(0, rows)
        if self.cache is not None:
            self.cache.reorder(rows)


def _follow(x: Tensor, index: Tensor) -> Tensor:
    """x's rows `index`: in place when the shape stays (a graph replays fixed addresses), else a new tensor."""
    if index.numel() == x.size(0):
        return x.copy_(x.index_select(0, index))  # the read is a copy: safe in place
    return x.index_select(0, index)


def step(model: Transformer, st: BeamState, c: Consts, first: bool, prefix_len: int | None = None) -> None:
    """One step of the search, in place on st. first: the first step, where each sentence has one row (<s>)
    and gets K. prefix_len: recompute the whole prefix of that many positions (use_cache=False, the
    reference), else feed the newest token only."""
    K, b, k = c.K, st.scores.size(0), st.k
    V = model.config.vocab_size
    if prefix_len is None:
        step_ids = st.tokens.index_select(1, st.t)  # (b * k, 1): the newest token, at the device's step
    else:
        step_ids = st.tokens[:, :prefix_len]  # (b * k, t + 1)
    hidden = model.decode(step_ids, st.memory, st.src_key_padding_mask, cache=st.cache)  # (b * k, T, d_model)
    logp = torch.log_softmax(model.project(hidden[:, -1]).float(), dim=-1)  # (b * k, V)
    logp = logp + torch.where(st.t < c.min_len, c.bias_no_eos, c.bias)  # -inf on what may not come next
    cand = (st.scores.view(b * k, 1) + logp).view(b, k * V)  # (b, k * V)
    top_scores, top_idx = cand.topk(2 * K, dim=1)  # (b, 2K), best first
    top_beam, top_tok = top_idx // V, top_idx % V  # (b, 2K) each
    is_eos = top_tok == c.eos_id  # (b, 2K)
    first_row = torch.arange(b, device=cand.device)[:, None] * k  # (b, 1): each sentence's first row

    # Live hypotheses of the next step: the first K candidates that do not end in </s> (fairseq's rule).
    keep = torch.topk(is_eos.long() * (2 * K) + c.rank, K, dim=1, largest=False).indices  # (b, K)
    parents = top_beam.gather(1, keep)  # (b, K): beam each live hypothesis extends
    new_scores, new_tok = top_scores.gather(1, keep), top_tok.gather(1, keep)  # (b, K) each
    length = st.t + 1  # (1,): tokens of every hypothesis after this step, </s> counted

    # The candidates ending in </s> among the first K are finished, up to K per sentence.
    live = ~st.done  # (b,)
    hits = is_eos[:, :K] & (top_scores[:, :K] > float("-inf")) & live[:, None]  # (b, K)
    eos_rows = (top_beam[:, :K] + first_row).view(-1)  # (b * K,): the row each one extends
    ended_tokens = st.tokens.index_select(0, eos_rows).view(b, K, -1)[:, :, 1:]  # (b, K, L)
    st.finished.add(hits, ended_tokens, top_scores[:, :K], length, ended=True, limit=K)

    # Follow the beams: every row-aligned tensor takes its parent's row, then the new token.
    src_rows = (parents + first_row).view(-1)  # (b * K,)
    st.tokens = _follow(st.tokens, src_rows)  # (b * K, L + 1)
    st.tokens.index_copy_(1, length, new_tok.view(-1, 1))
    if first:  # the beams appear: the rows of memory and of both attentions' caches are copied K times
        st.memory = st.memory.index_select(0, src_rows)
        if st.src_key_padding_mask is not None:
            st.src_key_padding_mask = st.src_key_padding_mask.index_select(0, src_rows)
        if st.cache is not None:
            st.cache.reorder(src_rows)
    elif st.cache is not None:  # beams stay within their sentence, whose memory they share
        for cache in st.cache.self_attn:
            cache.reorder(src_rows, at_append=True)  # a grown cache: in the next step's append, one copy

    # A sentence is done once K hypotheses ended, or at its maximum length, where the live ones are kept, cut.
    ended = live & ((st.finished.count >= K) | (length >= st.max_lens))  # (b,)
    cut = (ended & (st.finished.count < K))[:, None] & (new_scores > float("-inf"))  # (b, K)
    cut_tokens = st.tokens.view(b, K, -1)[:, :, 1:]  # (b, K, L): the live hypotheses with their new token
    st.finished.add(cut, cut_tokens, new_scores, length, ended=False, limit=2 * K)
    st.done |= ended
    if first:
        st.scores = new_scores
    else:
        st.scores.copy_(new_scores)
    st.t += 1
