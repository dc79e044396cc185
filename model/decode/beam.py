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
all be <s>), which also projects the cross-attention keys and values (and builds their mask) once per sentence
before they are copied to its beams. Each later step feeds only the newest token of each hypothesis (the
self-attention cache holds the rest).

The search state lives on the device (model/decode/beam_state.py): a step reads nothing back. A sentence that
is done keeps its rows, ignored, so shapes stay static; on a GPU the step is then replayed as a CUDA graph
(model/decode/step_graph.py), and whether every sentence is done comes back without waiting for the device
(model/decode/done_watch.py). On a CPU, where a read waits for nothing, it is read after every step and the
sentences that are done leave the batch (fewer rows to compute). check_every=N reads it once every N steps
instead, anywhere. The hypotheses become Python objects once, at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from model.decode.beam_state import BeamState, Consts, Finished, step
from model.decode.done_watch import done_watch
from model.decode.fused_weights import compiled, fused_weights
from model.decode.greedy import eval_mode, never_emitted
from model.decode.step_graph import StepRunner, use_graph
from model.nn.transformer import Transformer


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


def _check(
    model: Transformer, src_ids: Tensor, beam_size: int, n_best: int, alpha: float, check_every: int | None
) -> None:
    if src_ids.dim() != 2:
        raise ValueError(f"src_ids must be (batch, length), got shape {tuple(src_ids.shape)}")
    if not 1 <= beam_size <= model.config.vocab_size // 2:
        raise ValueError(f"beam_size={beam_size} must be in [1, vocab_size // 2 = {model.config.vocab_size // 2}]")
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be in [1, beam_size={beam_size}]")
    if alpha < 0:
        raise ValueError(f"alpha={alpha} must be >= 0")
    if check_every is not None and check_every < 1:
        raise ValueError(f"check_every={check_every} must be >= 1")
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
    check_every: int | None = None,
    cuda_graphs: bool = True,
) -> list[list[Hypothesis]]:
    """The n_best best hypotheses, best first, for each sentence of src_ids (B, S), right-padded with pad_id.

    A sentence's maximum length is max_target_len(its non-pad length, max_len_a, max_len_b), so a batch gives
    the same results as its sentences one by one, and beam_size=1 is greedy_decode. min_len forbids </s>
    before that many tokens. use_cache=False recomputes every prefix: slower, the reference the cache must
    match. The model is put in eval mode for the call and restored afterwards. check_every: steps between two
    reads of whether every sentence is done (default: every step on a CPU, without waiting on a GPU, see
    model/decode/done_watch.py); cuda_graphs: replay the step as a
    CUDA graph on a GPU (model/decode/step_graph.py).
    """
    _check(model, src_ids, beam_size, n_best, alpha, check_every)
    if src_ids.size(0) == 0:
        return []
    with eval_mode(model), fused_weights(model, src_ids.device):
        return _search(
            model, src_ids, beam_size, n_best, alpha, max_len_a, max_len_b, min_len, use_cache, check_every, cuda_graphs
        )


def cache_capacity(device: torch.device, positions: int) -> int | None:
    """Positions to preallocate in the decoder's self-attention caches: all of them on a GPU (a static cache,
    written in place, that a CUDA graph can replay), none on a CPU, where growing the caches by concatenation
    is faster, as each step attends over the written positions only (docs/gpu.md)."""
    return positions if device.type == "cuda" else None


def compacts(device: torch.device) -> bool:
    """Whether sentences that are done leave the batch at the checks: on a CPU (fewer rows computed); never
    on a GPU, where shapes stay static for the graph."""
    return device.type != "cuda"


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
    check_every: int | None,
    cuda_graphs: bool,
) -> list[list[Hypothesis]]:
    cfg, device = model.config, src_ids.device
    B, S = src_ids.shape
    pad = src_ids == cfg.pad_id  # (B, S)
    memory = model.encode(src_ids, pad)  # (B, S, d_model)
    # nothing to hide: the cross-attention runs without a mask (a faster kernel); one read per search
    src_key_padding_mask = pad if bool(pad.any()) else None
    src_lens = S - pad.sum(dim=1)  # (B,)
    # max_target_len on the device; the padded width bounds every sentence's limit without a read
    max_lens = (src_lens.double() * max_len_a + max_len_b).long().clamp(min=1, max=cfg.max_positions)  # (B,)
    L = max_target_len(S, max_len_a, max_len_b, cfg.max_positions)
    capacity = cache_capacity(device, L + 1) if use_cache else None  # + 1: <s>
    cache = model.new_cache(capacity) if use_cache else None

    tokens = torch.full((B, L + 1), cfg.pad_id, dtype=torch.long, device=device)  # (B, L + 1)
    tokens[:, 0] = cfg.bos_id
    st = BeamState(
        tokens=tokens,
        scores=torch.zeros(B, 1, device=device),
        t=torch.zeros(1, dtype=torch.long, device=device),
        max_lens=max_lens,
        done=torch.zeros(B, dtype=torch.bool, device=device),
        sentence=torch.arange(B, device=device),
        finished=Finished.empty(B, K, L, device),
        memory=memory,
        src_key_padding_mask=src_key_padding_mask,
        cache=cache,
    )
    consts = Consts.build(cfg, K, min_len, never_emitted(cfg), device)
    graphs = use_graph(device, cuda_graphs, capacity is not None, compiled(model))
    runner = StepRunner(lambda: step(model, st, consts, first=False), device, graphs)
    compact = compacts(device) and not graphs
    watch = done_watch(device, check_every)
    retired: list[tuple[Finished, Tensor]] = []  # sentences that left the batch, with their indices

    for t in range(L):
        if t == 0:
            step(model, st, consts, first=True, prefix_len=None if use_cache else 1)
        elif use_cache:
            runner()
        else:
            step(model, st, consts, first=False, prefix_len=t + 1)
        if t + 1 == L:  # after the last step every sentence is done
            break
        if compact:
            if (t + 1) % (check_every or 1) == 0 and _compact(st, retired):
                break
        elif watch.all_done(t + 1, st.done):
            break
    return _hypotheses(B, retired + [(st.finished, st.sentence)], n_best, alpha)


def _compact(st: BeamState, retired: list[tuple[Finished, Tensor]]) -> bool:
    """The sentences that are done leave the batch (their finished hypotheses go to `retired`); True when
    every one is done. One read, and two nonzero when some sentence left."""
    n_done = int(st.done.sum())
    if n_done == st.done.numel():
        return True
    if n_done:
        gone, keep = st.done.nonzero().squeeze(1), (~st.done).nonzero().squeeze(1)
        retired.append((st.finished.select(gone), st.sentence.index_select(0, gone)))
        st.select(keep)
    return False


def _hypotheses(B: int, parts: list[tuple[Finished, Tensor]], n_best: int, alpha: float) -> list[list[Hypothesis]]:
    """The finished slots as Hypothesis lists, best first: the search's one conversion to Python objects. Each
    sentence's n_best slots are chosen where they are (a stable sort by score, the order sorted() gave), so only
    those are read back: reading all 2K + 1 slots held a GPU worker's decoding thread for a fifth of its time."""
    done: list[list[Hypothesis]] = [[] for _ in range(B)]
    for part, ids in parts:
        slots = torch.arange(part.log_prob.size(1), device=part.count.device)  # (2K + 1,)
        score = part.log_prob.double() / ((5 + part.length.double()) / 6) ** alpha  # (b, 2K + 1)
        score = score.masked_fill(slots[None, :] >= part.count[:, None], float("-inf"))
        best = score.sort(dim=1, descending=True, stable=True).indices[:, :n_best]  # (b, n_best)
        tokens = part.tokens.gather(1, best[:, :, None].expand(-1, -1, part.tokens.size(2))).tolist()
        log_probs, lengths, ended = (t.gather(1, best).tolist() for t in (part.log_prob, part.length, part.ended))
        counts = part.count.clamp(max=n_best).tolist()
        for i, s in enumerate(ids.tolist()):
            for j in range(counts[i]):
                n = lengths[i][j] - ended[i][j]  # tokens, without the </s>
                done[s].append(_hypothesis(tokens[i][j][:n], log_probs[i][j], lengths[i][j], alpha, ended[i][j]))
    return [sorted(hyps, key=lambda h: h.score, reverse=True) for hyps in done]


def _hypothesis(tokens: list[int], log_prob: float, length: int, alpha: float, finished: bool) -> Hypothesis:
    return Hypothesis(tokens, log_prob / length_penalty(length, alpha), log_prob, finished)
