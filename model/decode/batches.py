"""How many sentences a beam search decodes at once: by count, and by the memory their hypotheses take.

A beam search's memory grows with beam x sentences x length: the decoder's self-attention cache (up to the target
length, about twice the source's), the cross-attention keys and values over the source, and the vocabulary-wide
scores of every hypothesis at each step. So a batch is bounded in "beam tokens": beam_size x sentences x the longest
source among them. On a CPU small batches are as fast per sentence as large ones; a GPU is filled only by hundreds
of sentences at once (`base`, beam 4: 550 sentences/s in batches of 32, 1,994 in batches of 128 on an H100).
"""

from __future__ import annotations

from collections.abc import Sequence

from model.nn.config import ModelConfig

CPU_BATCH_SENTENCES = 32  # what decoding used everywhere before: on a CPU larger batches are not faster
GPU_BATCH_SENTENCES = 1024
MEMORY_SHARE = 0.25  # of the device's free memory, for one batch's hypotheses (the rest: the estimate's slack)


def bytes_per_beam_token(config: ModelConfig, dtype_bytes: int) -> int:
    """A rough upper bound of the memory one hypothesis takes per source token: the decoder's self-attention cache
    (target up to 2 x source + 10, counted as 3 x source) and its cross-attention keys and values (1 x source),
    keys and values each, in every decoder layer; plus its fp32 scores over the vocabulary (a few copies at each
    step), spread over a short source of 16 tokens."""
    caches = 2 * (3 + 1) * config.n_decoder_layers * config.d_model * dtype_bytes
    scores = 3 * 4 * config.vocab_size // 16
    return caches + scores


def beam_token_budget(config: ModelConfig, dtype_bytes: int, free_memory: int) -> int:
    """Beam tokens (beam x sentences x longest source) one batch may hold on a device with `free_memory` bytes."""
    return max(1, int(free_memory * MEMORY_SHARE) // bytes_per_beam_token(config, dtype_bytes))


def decode_batches(
    lengths: Sequence[int], max_sentences: int, beam_size: int = 1, max_beam_tokens: int | None = None
) -> list[list[int]]:
    """Indices into `lengths` (source lengths), sorted by length so that a batch pads little, cut into batches of at
    most `max_sentences` whose beam_size x size x longest source stays within `max_beam_tokens` (when given). A
    sentence alone over the budget still gets a batch of its own."""
    if max_sentences < 1:
        raise ValueError(f"batch_size={max_sentences} must be >= 1")
    if max_beam_tokens is not None and max_beam_tokens < 1:
        raise ValueError(f"max_beam_tokens={max_beam_tokens} must be >= 1")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:  # ascending: the newest is the longest of its batch
        too_many = len(batch) >= max_sentences
        too_big = max_beam_tokens is not None and beam_size * (len(batch) + 1) * lengths[i] > max_beam_tokens
        if batch and (too_many or too_big):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches
