"""How sure a model is of a given translation: the probability of each of its tokens under teacher forcing (one
decoder pass over source and target, as fairseq's SequenceScorer and CTranslate2's score_batch do).

The search's own log-probabilities are the same numbers (a log-softmax over the whole vocabulary at each step,
model/decode/beam_state.py), so the per-token values of a beam-search translation add up to its log_prob; scoring
afterwards keeps the search free of per-token bookkeeping and scores any translation, whoever made it.
`confidence` condenses them into one number comparable across lengths and backends: the geometric mean of the
token probabilities, </s> included (exp of the mean log-probability per token).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch

from model.data.batching import pad_sequences
from model.decode.greedy import eval_mode
from model.nn.transformer import Transformer

SCORE_BATCH = 32  # sentences a pass, at most
LOGITS_BUDGET = 1 << 26  # and at most this many logits a pass, (b, T, V): 256 MB in float32 (a GPU batch of 1,024
# sentences of 100 tokens over 32k words would otherwise take 13 GB)


@torch.inference_mode()
def token_log_probs(
    model: Transformer,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    batch_size: int = SCORE_BATCH,
) -> list[list[float]]:
    """For each pair (source ids ending with </s>; target ids without <s> and </s>): the log-probability of each
    target token given the source and the tokens before it, then that of </s> (len(target) + 1 values), except
    for a target that fills the model's max_positions: nothing can follow it, and it gets len(target) values."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources for {len(targets)} targets: one each")
    cfg = model.config
    device = next(model.parameters()).device
    out: list[list[float]] = [[] for _ in targets]
    with eval_mode(model):
        for chunk in _passes([len(t) + 1 for t in targets], batch_size, cfg.vocab_size):
            src = pad_sequences([sources[i] for i in chunk], cfg.pad_id).to(device)  # (b, S)
            labels = [[*targets[i], cfg.eos_id][: cfg.max_positions] for i in chunk]  # </s> where it fits
            tgt_in = pad_sequences([[cfg.bos_id, *y[:-1]] for y in labels], cfg.pad_id).to(device)  # (b, T)
            gold = pad_sequences(labels, cfg.pad_id).to(device)  # (b, T)
            logp = torch.log_softmax(model(src, tgt_in).float(), dim=-1)  # (b, T, V)
            picked = logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)  # (b, T)
            for row, (i, y) in enumerate(zip(chunk, labels)):
                out[i] = picked[row, : len(y)].tolist()
    return out


def _passes(lengths: list[int], batch_size: int, vocab_size: int) -> Iterator[list[int]]:
    """Indices in order of length (like lengths together: less padding), cut into passes of at most batch_size
    sentences and LOGITS_BUDGET logits (one sentence a pass at least)."""
    chunk: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if chunk and (len(chunk) == batch_size or (len(chunk) + 1) * lengths[i] * vocab_size > LOGITS_BUDGET):
            yield chunk
            chunk = []
        chunk.append(i)
    if chunk:
        yield chunk


def search_confidence(log_prob: float, n_tokens: int, finished: bool) -> float:
    """`confidence` from what a search keeps of a hypothesis: the sum of its tokens' log-probabilities (and that of
    </s> when it finished), and its length without </s>. A hypothesis cut at the maximum length scores its tokens
    alone, as token_log_probs does for a target that fills max_positions."""
    scored = n_tokens + int(finished)
    if scored == 0:
        raise ValueError("a hypothesis cut before its first token has no log-probability to condense")
    return math.exp(log_prob / scored)


def confidence(log_probs: Sequence[float]) -> float:
    """The geometric mean of the token probabilities: exp(mean log-probability), in (0, 1]."""
    if not log_probs:
        raise ValueError("no token log-probabilities to condense: a translation scores at least its </s>")
    return math.exp(sum(log_probs) / len(log_probs))
