"""Greedy search over a trained Transformer (beam search: model/decode/beam.py; sampling: model/decode/sampling.py),
the token-a-step loop greedy search and sampling share, and the eval-mode switch every decoder and evaluation uses."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

# Attention kernels outside training on a GPU: every backend of scaled_dot_product_attention but cuDNN's, which
# builds a plan for each new shape. On an H200 (`base`, bf16) a beam search's first call at a new batch shape took
# 375-386 ms against 24-26 ms for the next ones; training buckets its shapes and pays that once a bucket, but a
# decoder's shapes change with every batch (sentences, source length, the cache's length), so an inference worker
# paid it again and again (one-sentence p99 over HTTP 426-481 ms against a p50 of 37-45 ms). Flash and
# memory-efficient attention build nothing per shape.
DECODING_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def decoding_attention(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """DECODING_ATTENTION's kernels on a GPU; nothing changes on a CPU (no cuDNN attention there)."""
    return sdpa_kernel(DECODING_ATTENTION) if device.type == "cuda" else contextlib.nullcontext()


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """The model in eval mode inside the block and in its previous mode afterwards, with DECODING_ATTENTION's kernels
    on a GPU. Free for a model already in eval mode (Module.eval() walks every submodule: a few percent of a short
    search)."""
    with contextlib.ExitStack() as stack:
        parameter = next(model.parameters(), None)
        if parameter is not None:
            stack.enter_context(decoding_attention(parameter.device))
        if model.training:
            model.eval()
            stack.callback(model.train)
        yield


def default_max_len(model: Transformer, src_len: int) -> int:
    """src_len * 2 + 10 new tokens, but never more positions than the model has."""
    return min(src_len * 2 + 10, model.config.max_positions)


def _max_lens(model: Transformer, src_ids: Tensor, max_len: int | None) -> list[int]:
    """Each sentence's own limit: from its non-pad length, so a batch decodes as its sentences one by one."""
    if max_len is not None:
        return [min(max_len, model.config.max_positions)] * src_ids.size(0)
    src_lens = (src_ids != model.config.pad_id).sum(dim=1).tolist()  # (B,)
    return [default_max_len(model, n) for n in src_lens]


@torch.inference_mode()
def greedy_decode(
    model: Transformer, src_ids: Tensor, max_len: int | None = None, use_cache: bool = True
) -> list[list[int]]:
    """Translate a batch src_ids (B, S), padded with config.pad_id, by taking the argmax at every step.

    Returns one list of token ids per sentence: what follows BOS, up to and excluding EOS (or max_len tokens).
    max_len defaults to default_max_len() of each sentence's own length (padding does not count, so a sentence
    decodes the same alone or beside a longer one) and is capped at config.max_positions. use_cache=False recomputes
    the whole prefix every step: slower, kept as the reference the KV cache must match.
    The model is put in eval mode for the call and restored afterwards.
    """
    return step_decode(model, src_ids, lambda logits: logits.argmax(dim=-1), max_len, use_cache)


def step_decode(
    model: Transformer,
    src_ids: Tensor,
    choose: Callable[[Tensor], Tensor],
    max_len: int | None = None,
    use_cache: bool = True,
) -> list[list[int]]:
    """One token a step for each sentence, `choose` picking it from the step's logits (B, V) -> (B,) ids, tokens
    never emitted already at -inf: greedy_decode takes the argmax, model/decode/sampling.py draws from them."""
    cfg = model.config
    max_lens = _max_lens(model, src_ids, max_len)
    with eval_mode(model):
        src_key_padding_mask = src_ids == cfg.pad_id  # (B, S)
        memory = model.encode(src_ids, src_key_padding_mask)  # (B, S, d_model)
        B = src_ids.size(0)
        ys = torch.full((B, 1), cfg.bos_id, dtype=torch.long, device=src_ids.device)  # (B, 1)
        finished = torch.zeros(B, dtype=torch.bool, device=src_ids.device)
        at_limit = torch.tensor(max_lens, device=src_ids.device)  # (B,)
        cache = model.new_cache() if use_cache else None
        for step in range(max(max_lens)):
            step_ids = ys[:, -1:] if use_cache else ys  # the cache already holds the earlier positions
            hidden = model.decode(step_ids, memory, src_key_padding_mask, cache=cache)  # (B, T, d_model)
            logits = model.project(hidden[:, -1])  # (B, V)
            logits[:, never_emitted(cfg)] = float("-inf")
            next_ids = choose(logits)  # (B,)
            next_ids = next_ids.masked_fill(finished, cfg.pad_id)
            ys = torch.cat([ys, next_ids[:, None]], dim=1)  # (B, T + 1)
            finished |= (next_ids == cfg.eos_id) | (at_limit <= step + 1)
            if finished.all():
                break
    return [_strip(row[:limit], cfg.eos_id) for row, limit in zip(ys[:, 1:].tolist(), max_lens)]


def never_emitted(cfg: ModelConfig) -> list[int]:
    """Ids a decoder never outputs: <pad>, <s> and <mask> are inputs only (as generate() bans Marian's <pad>;
    an imported Marian model's <s> row is its <pad> row, model/io/marian_import.py)."""
    return [cfg.pad_id, cfg.bos_id, cfg.mask_id]


def _strip(ids: list[int], eos_id: int) -> list[int]:
    return ids[: ids.index(eos_id)] if eos_id in ids else ids
