"""Greedy search over a trained Transformer (beam search lives elsewhere)."""

from __future__ import annotations

import torch
from torch import Tensor

from model.transformer import Transformer


def default_max_len(model: Transformer, src_len: int) -> int:
    """src_len * 2 + 10 new tokens, but never more positions than the model has."""
    return min(src_len * 2 + 10, model.config.max_positions)


@torch.inference_mode()
def greedy_decode(
    model: Transformer, src_ids: Tensor, max_len: int | None = None, use_cache: bool = True
) -> list[list[int]]:
    """Translate a batch src_ids (B, S), padded with config.pad_id, by taking the argmax at every step.

    Returns one list of token ids per sentence: what follows BOS, up to and excluding EOS (or max_len tokens).
    max_len defaults to default_max_len() and is capped at config.max_positions. use_cache=False recomputes
    the whole prefix every step: slower, kept as the reference the KV cache must match.
    The model is put in eval mode for the call and restored afterwards.
    """
    cfg = model.config
    max_len = min(max_len if max_len is not None else default_max_len(model, src_ids.size(1)), cfg.max_positions)
    was_training = model.training
    model.eval()
    try:
        src_key_padding_mask = src_ids == cfg.pad_id  # (B, S)
        memory = model.encode(src_ids, src_key_padding_mask)  # (B, S, d_model)
        B = src_ids.size(0)
        ys = torch.full((B, 1), cfg.bos_id, dtype=torch.long, device=src_ids.device)  # (B, 1)
        finished = torch.zeros(B, dtype=torch.bool, device=src_ids.device)
        cache = model.new_cache() if use_cache else None
        for _ in range(max_len):
            step_ids = ys[:, -1:] if use_cache else ys  # the cache already holds the earlier positions
            hidden = model.decode(step_ids, memory, src_key_padding_mask, cache=cache)  # (B, T, d_model)
            next_ids = model.project(hidden[:, -1]).argmax(dim=-1)  # (B,)
            next_ids = next_ids.masked_fill(finished, cfg.pad_id)
            ys = torch.cat([ys, next_ids[:, None]], dim=1)  # (B, T + 1)
            finished |= next_ids == cfg.eos_id
            if finished.all():
                break
    finally:
        model.train(was_training)
    return [_strip(row, cfg.eos_id) for row in ys[:, 1:].tolist()]


def _strip(ids: list[int], eos_id: int) -> list[int]:
    return ids[: ids.index(eos_id)] if eos_id in ids else ids
