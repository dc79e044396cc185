"""Batched beam search with the KV cache (Vaswani et al., 2017, Sec. 6.1: "beam search with a beam size of 4
and length penalty alpha = 0.6"; the penalty is GNMT's, Wu et al., 2016, Sec. 7).

Every sentence keeps beam_size live hypotheses. Each step scores all beam_size * V continuations by their
summed log-probability and keeps the best 2 * beam_size: those ending in </s> among the first beam_size
are finished, the first beam_size others stay live (fairseq's rule, so there are always enough live ones).
A sentence is done once beam_size hypotheses have finished, or at its maximum length, where the live ones
are kept unfinished (as greedy_decode keeps a sentence without </s>); the search stops when every sentence
is done. This is HF generate's early_stopping=True. Finished hypotheses are ranked by
log P(y | x) / lp(y), lp(y) = ((5 + |y|) / 6)^alpha, with |y| counting the </s>.

Cost: the source is encoded once per sentence, and the first step runs once per sentence (its beams would
all be <s>), which also projects the cross-attention keys and values once per sentence before they are
copied to its beams. Each later step feeds only the newest token of each hypothesis (the self-attention
cache holds the rest); a hypothesis that extends its own beam keeps its cache row, so following the beams
copies only the rows of the others (DecoderCache.reorder done in place). Sentences that are done leave
the batch, so a batch costs what its live sentences cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model.decode.greedy import eval_mode, never_emitted
from model.nn.transformer import DecoderCache, Transformer


@dataclass(frozen=True)
class Hypothesis:
    """One output of the search; tokens exclude <s> and </s>."""

    tokens: list[int]
    score: float  # log_prob / length_penalty(length, alpha): what the n-best list is sorted by
    log_prob: float  # sum of the log-probabilities of the tokens (and of </s> when finished)
    finished: bool  # ended with </s>; False when cut at the maximum length


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's lp(Y) = ((5 + |Y|) / (5 + 1))^alpha (Wu et al., 2016, Eq. 14); alpha = 0 turns it off."""
    return float(((5 + length) / 6) ** alpha)


def max_target_len(src_len: int, max_len_a: float, max_len_b: int, max_positions: int) -> int:
    """Most tokens (</s> included) a hypothesis may have: max_len_a * src_len + max_len_b, at least 1 and at
    most max_positions. src_len counts the source's </s>, as greedy_decode's default (a=2, b=10) does."""
    return max(1, min(int(max_len_a * src_len + max_len_b), max_positions))


def _check(model: Transformer, src_ids: Tensor, beam_size: int, n_best: int, alpha: float) -> None:
    if src_ids.dim() != 2:
        raise ValueError(f"src_ids must be (batch, length), got shape {tuple(src_ids.shape)}")
    if not 1 <= beam_size <= model.config.vocab_size // 2:
        raise ValueError(f"beam_size={beam_size} must be in [1, vocab_size // 2 = {model.config.vocab_size // 2}]")
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be in [1, beam_size={beam_size}]")
    if alpha < 0:
        raise ValueError(f"alpha={alpha} must be >= 0")
    if src_ids.size(1) > model.config.max_positions:
        raise ValueError(f"source length {src_ids.size(1)} exceeds max_positions={model.config.max_positions}")


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src_ids: Tensor,
    beam_size: int = 4,
    n_best: int = 1,
    alpha: float = 0.6,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
    min_len: int = 0,
    use_cache: bool = True,
) -> list[list[Hypothesis]]:
    """The n_best best hypotheses, best first, for each sentence of src_ids (B, S), right-padded with pad_id.

    A sentence's maximum length is max_target_len(its non-pad length, max_len_a, max_len_b), so a batch gives
    the same results as its sentences one by one, and beam_size=1 is greedy_decode. min_len forbids </s>
    before that many tokens. use_cache=False recomputes every prefix: slower, the reference the cache must
    match. The model is put in eval mode for the call and restored afterwards.
    """
    _check(model, src_ids, beam_size, n_best, alpha)
    if src_ids.size(0) == 0:
        return []
    with eval_mode(model):
        return _search(model, src_ids, beam_size, n_best, alpha, max_len_a, max_len_b, min_len, use_cache)


def cache_capacity(device: torch.device, positions: int) -> int | None:
    """Positions to preallocate in the decoder's self-attention caches: all of them on a GPU (no reallocation
    per step), none on a CPU, where growing the caches by concatenation is faster, as the reorder after each
    step copies the whole buffer (docs/gpu.md)."""
    return positions if device.type == "cuda" else None


def _search(
    model: Transformer,
    src_ids: Tensor,
    K: int,
    n_best: int,
    alpha: float,
    max_len_a: float,
    max_len_b: int,
    min_len: int,
    use_cache: bool,
) -> list[list[Hypothesis]]:
    cfg, device = model.config, src_ids.device
    B, V = src_ids.size(0), cfg.vocab_size
    src_key_padding_mask: Tensor | None  # None further down when no sentence has padding
    src_key_padding_mask = src_ids == cfg.pad_id  # (B, S)
    src_lens = (~src_key_padding_mask).sum(dim=1).tolist()
    max_lens = [max_target_len(n, max_len_a, max_len_b, cfg.max_positions) for n in src_lens]
    memory = model.encode(src_ids, src_key_padding_mask)  # (B, S, d_model)
    if min(src_lens) == src_ids.size(1):
        src_key_padding_mask = None  # nothing to hide: the cross-attention runs without a mask (a faster kernel)
    cache = model.new_cache(cache_capacity(device, max(max_lens) + 1)) if use_cache else None  # + 1: <s>

    # The live batch holds b sentences (ids in `alive`) with k hypotheses each, row = sentence * k + beam.
    # k is 1 on the first step, where all beams would be the same <s>, and K afterwards.
    alive, k = list(range(B)), 1
    tokens = torch.full((B, 1), cfg.bos_id, dtype=torch.long, device=device)  # (b * k, t): <s> + generated
    scores = torch.zeros(B, 1, device=device)  # (b, k) summed log-probs of the live hypotheses
    done: list[list[Hypothesis]] = [[] for _ in range(B)]
    rank = torch.arange(2 * K, device=device)  # (2K,)

    for step in range(max(max_lens)):
        step_ids = tokens[:, -1:] if use_cache else tokens  # the cache already holds the earlier positions
        hidden = model.decode(step_ids, memory, src_key_padding_mask, cache=cache)  # (b * k, T, d_model)
        logp = torch.log_softmax(model.project(hidden[:, -1]).float(), dim=-1)  # (b * k, V)
        logp[:, never_emitted(cfg)] = float("-inf")
        if step < min_len:
            logp[:, cfg.eos_id] = float("-inf")
        b = len(alive)
        cand = (scores.view(b * k, 1) + logp).view(b, k * V)  # (b, k * V)
        top_scores, top_idx = cand.topk(min(2 * K, k * V), dim=1)  # (b, 2K), best first
        top_beam, top_tok = top_idx // V, top_idx % V  # (b, 2K) each
        is_eos = top_tok == cfg.eos_id  # (b, 2K)

        # Live hypotheses of the next step: the first K candidates that do not end in </s>.
        keep = torch.topk(is_eos.long() * (2 * K) + rank[: is_eos.size(1)], K, dim=1, largest=False).indices
        parents = top_beam.gather(1, keep)  # (b, K) beam each live hypothesis extends
        if k == K:  # put them in slots that keep most cache rows where they are (see _assign_slots)
            by_slot = _assign_slots(parents).argsort(dim=1)  # (b, K): hypothesis for each slot
            keep, parents = keep.gather(1, by_slot), parents.gather(1, by_slot)
        new_scores, new_tok = top_scores.gather(1, keep), top_tok.gather(1, keep)  # (b, K) each

        rows = tokens[:, 1:].view(b, k, tokens.size(1) - 1)  # (b, k, t - 1): what the hypotheses generated
        _finish_ended(done, alive, rows, top_scores[:, :K], top_beam[:, :K], is_eos[:, :K], K, step + 1, alpha)
        ended = [i for i, s in enumerate(alive) if len(done[s]) >= K or step + 1 >= max_lens[s]]
        cut = [i for i in ended if len(done[alive[i]]) < K]
        if cut:  # at its maximum length a sentence keeps its live hypotheses, unfinished
            _finish_cut(done, alive, cut, rows, new_scores, parents, new_tok, step + 1, alpha)
        if len(ended) == b:
            break

        src_rows = parents + torch.arange(b, device=device)[:, None] * k  # (b, K): row each one extends
        if ended:  # sentences that are done leave the batch
            ended_set = set(ended)
            still = [i for i in range(b) if i not in ended_set]
            alive = [alive[i] for i in still]
            sel = torch.tensor(still, device=device)
            new_scores, new_tok, src_rows = new_scores[sel], new_tok[sel], src_rows[sel]
        src_rows = src_rows.view(-1)  # (b' * K,)
        tokens = torch.cat([tokens[src_rows], new_tok.view(-1, 1)], dim=1)  # (b' * K, t + 1)
        scores = new_scores
        if k == 1 or ended:  # beams appear or sentences leave: every row-aligned tensor follows
            memory = memory.index_select(0, src_rows)
            if src_key_padding_mask is not None:
                src_key_padding_mask = src_key_padding_mask.index_select(0, src_rows)
            if cache is not None:
                cache.reorder(src_rows)
        elif cache is not None:
            _follow_beams(cache, src_rows)
        k = K

    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:n_best] for hyps in done]


def _finish_ended(
    done: list[list[Hypothesis]],
    alive: list[int],
    rows: Tensor,
    scores: Tensor,
    beams: Tensor,
    is_eos: Tensor,
    K: int,
    length: int,
    alpha: float,
) -> None:
    """Add the candidates ending in </s> among each sentence's first K to its finished list (up to K)."""
    hits = is_eos & (scores > float("-inf"))  # (b, K)
    if not bool(hits.any()):
        return
    scores_l, beams_l = scores.tolist(), beams.tolist()
    for i, r in hits.nonzero().tolist():
        if len(done[alive[i]]) < K:
            done[alive[i]].append(_hypothesis(rows[i, beams_l[i][r]].tolist(), scores_l[i][r], length, alpha, True))


def _finish_cut(
    done: list[list[Hypothesis]],
    alive: list[int],
    cut: list[int],
    rows: Tensor,
    scores: Tensor,
    parents: Tensor,
    new_tok: Tensor,
    length: int,
    alpha: float,
) -> None:
    """Add the live hypotheses of the sentences in `cut` (batch positions) to their lists, unfinished."""
    scores_l, parents_l, tok_l = scores.tolist(), parents.tolist(), new_tok.tolist()
    for i in cut:
        for score, parent, tok in zip(scores_l[i], parents_l[i], tok_l[i]):
            if score > float("-inf"):
                done[alive[i]].append(_hypothesis(rows[i, parent].tolist() + [tok], score, length, alpha, False))


def _follow_beams(cache: DecoderCache, src_rows: Tensor) -> None:
    """DecoderCache.reorder(src_rows) for beams that stay in their sentences, in place and only where needed.

    Rows of one sentence share its memory, so their cross-attention caches are equal and stay. In the
    self-attention caches only the rows whose hypothesis moved are copied (_assign_slots keeps them few).
    """
    moved = (src_rows != torch.arange(src_rows.numel(), device=src_rows.device)).nonzero().squeeze(1)
    if moved.numel() == 0:
        return
    from_rows = src_rows[moved]
    for c in cache.self_attn:
        assert c.key is not None and c.value is not None  # filled by the first step
        c.key.index_copy_(0, moved, c.key.index_select(0, from_rows))  # the read is a copy: safe in place
        c.value.index_copy_(0, moved, c.value.index_select(0, from_rows))


def _assign_slots(parents: Tensor) -> Tensor:
    """Slot (row within its sentence) for each new live hypothesis, given the beam it extends: (b, K) -> (b, K),
    a permutation per sentence. Each parent's first child takes the parent's own slot, the other children
    the slots whose parents had none; so a beam that simply goes on never moves in the cache."""
    K = parents.size(1)
    onehot = F.one_hot(parents, K)  # (b, K children, K parents)
    first = (onehot.cumsum(dim=1) * onehot).sum(dim=-1) == 1  # (b, K): child is its parent's first
    taken = (onehot * first[..., None]).sum(dim=1) > 0  # (b, K slots): kept by a first child
    free = taken.to(torch.uint8).argsort(dim=1, stable=True)  # (b, K): the free slots first, ascending
    need = (~first).long().cumsum(dim=1) - 1  # (b, K): rank among the children without a slot
    return torch.where(first, parents, free.gather(1, need.clamp(min=0)))


def _hypothesis(tokens: list[int], log_prob: float, length: int, alpha: float, finished: bool) -> Hypothesis:
    return Hypothesis(tokens, log_prob / length_penalty(length, alpha), log_prob, finished)
