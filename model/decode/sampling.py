"""Sampled translations: each token drawn from the model's distribution, sharpened or flattened by a temperature and
restricted to the k likeliest tokens where asked, rather than the likeliest sequence a beam search looks for.

Back-translation wants them: Edunov et al. (2018, "Understanding Back-Translation at Scale") found synthetic sources
sampled from the reverse model (unrestricted, or from the top 10) teach the forward model more than beam search's,
which are too regular. A seed makes a call repeatable: the same texts, settings and seed give the same translations
(the texts are decoded in the same length-sorted batches, each draw from one generator).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from model.data.batching import pad_sequences
from model.data.tokenizer import Tokenizer
from model.decode.batches import CPU_BATCH_SENTENCES, decode_batches
from model.decode.greedy import step_decode
from model.decode.queries import sources_ids
from model.nn.transformer import Transformer


@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0  # < 1 sharper (towards greedy), > 1 flatter
    top_k: int = 0  # draw among the k likeliest tokens; 0: the whole vocabulary
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature={self.temperature} must be > 0")
        if self.top_k < 0:
            raise ValueError(f"top_k={self.top_k} must be >= 0 (0: the whole vocabulary)")


def draw(logits: Tensor, sampling: Sampling, generator: torch.Generator) -> Tensor:
    """One token id per row of logits (B, V), drawn from softmax(logits / temperature) over the top_k (ties at the
    k-th score included); tokens at -inf are never drawn."""
    if sampling.top_k:
        kth = logits.topk(min(sampling.top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (B,)


@torch.inference_mode()
def sample_decode(
    model: Transformer, src_ids: Tensor, sampling: Sampling, generator: torch.Generator, max_len: int | None = None
) -> list[list[int]]:
    """As greedy_decode (model/decode/greedy.py), each token drawn by draw() rather than the argmax."""
    return step_decode(model, src_ids, lambda logits: draw(logits, sampling, generator), max_len)


def sample_translate(
    model: Transformer,
    tokenizer: Tokenizer,
    texts: Sequence[str],
    sampling: Sampling,
    batch_size: int = CPU_BATCH_SENTENCES,
) -> list[str]:
    """A sampled translation of each text, in order. Texts must fit the model (model/decode/queries.sources_ids
    raises ValueError naming one that does not); they are decoded in length-sorted batches of at most batch_size."""
    if isinstance(texts, str):
        raise ValueError(f"texts must be a list of strings, got {texts!r:.80}")
    sources = sources_ids(model, tokenizer, texts)
    device = next(model.parameters()).device
    generator = torch.Generator(device=device)
    generator.manual_seed(sampling.seed)
    out: list[str] = [""] * len(texts)
    for batch in decode_batches([len(s) for s in sources], batch_size):
        src = pad_sequences([sources[i] for i in batch], model.config.pad_id).to(device)  # (b, S)
        for i, ids in zip(batch, sample_decode(model, src, sampling, generator)):
            out[i] = tokenizer.decode(ids)
    return out
