"""Masked-token fills of a denoising model, with the fields of the Hugging Face fill-mask pipeline: one token per
<mask>, or a span beam for span-denoising (BART-style) models."""

from __future__ import annotations

import math
import re
from typing import Any

import torch
from torch import Tensor

from model.data.special_tokens import SPECIAL_TOKENS
from model.data.tokenizer import Tokenizer
from model.decode.greedy import eval_mode
from model.decode.queries import source_ids
from model.nn.transformer import Transformer

_MASK_TEXT = SPECIAL_TOKENS[4]


@torch.inference_mode()
def fill_mask(
    model: Transformer, tokenizer: Tokenizer, text: str, top_k: int = 5, max_span_tokens: int = 1, span_beam: int = 4
) -> list[list[dict[str, Any]]]:
    """For each "<mask>" in text, left to right, the top_k candidates {"score", "token", "token_str",
    "sequence"} (the Hugging Face fill-mask pipeline's fields), most probable first.

    The model is a denoising one: the encoder reads the masked text, the decoder writes the original. The
    decoder is teacher-forced with the text's tokens; at a mask its next-token softmax gives the candidates
    (score = probability, so the top_k scores sum to at most 1; special tokens are never candidates), and the
    most probable one is fed on, so later masks see the earlier ones filled. "sequence" is the text with this
    mask filled by the candidate (other masks left as "<mask>"); token_str is the candidate without
    surrounding spaces.

    max_span_tokens > 1 is for span-denoising models, where one <mask> stands for several tokens: a beam of
    span_beam (at least top_k) extends the span token by token, and a span ends where the decoder next
    writes the token that follows the mask in the text (</s> for a mask at the end). A candidate's score is
    P(span, then that token): spans never contain it, so candidates are disjoint events and sum to <= 1;
    "token" is then the list of the span's ids.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {text!r:.80}")
    if top_k < 1 or max_span_tokens < 1 or span_beam < 1:
        raise ValueError(f"top_k={top_k}, max_span_tokens={max_span_tokens}, span_beam={span_beam} must be >= 1")
    src_ids = source_ids(model, tokenizer, text)
    mask_id = tokenizer.mask_id
    masks = [i for i, t in enumerate(src_ids) if t == mask_id]
    if not masks:
        raise ValueError(f"text has no {_MASK_TEXT} token to fill: {text[:80]!r}")
    spans = [m.span() for m in re.finditer(re.escape(_MASK_TEXT), text)]
    if len(spans) != len(masks):  # e.g. "<mask>" spelled inside a longer token; cannot place the fills
        raise ValueError(f"found {len(spans)} '{_MASK_TEXT}' in the text but {len(masks)} mask tokens")

    with eval_mode(model):
        device = next(model.parameters()).device
        src = torch.tensor([src_ids], device=device)  # (1, S)
        src_key_padding_mask = src == model.config.pad_id
        memory = model.encode(src, src_key_padding_mask)  # (1, S, d_model)
        prefix = [model.config.bos_id]  # decoder input so far
        results: list[list[dict[str, Any]]] = []
        for k, pos in enumerate(masks):
            prev = masks[k - 1] + 1 if k else 0
            prefix += src_ids[prev:pos]  # teacher-force the unmasked text up to this mask
            if max_span_tokens == 1:
                cands = _token_candidates(model, memory, src_key_padding_mask, prefix, top_k)
            else:
                anchor = src_ids[pos + 1] if src_ids[pos + 1] != mask_id else None
                cands = _span_candidates(
                    model, memory, src_key_padding_mask, prefix, top_k, max_span_tokens, max(span_beam, top_k), anchor
                )
            results.append(
                [_candidate_dict(tokenizer, text, spans[k], ids, p, max_span_tokens > 1) for ids, p in cands]
            )
            prefix += cands[0][0]  # later masks see the best fill
    return results


def _next_log_probs(
    model: Transformer, memory: Tensor, src_key_padding_mask: Tensor, prefixes: list[list[int]]
) -> Tensor:
    """log P(next token | prefix, source) for equal-length prefixes: (len(prefixes), V)."""
    n = len(prefixes)
    tgt = torch.tensor(prefixes, device=memory.device)  # (n, T)
    hidden = model.decode(tgt, memory.expand(n, -1, -1), src_key_padding_mask.expand(n, -1))  # (n, T, d_model)
    return torch.log_softmax(model.project(hidden[:, -1]).float(), dim=-1)  # (n, V)


def _token_candidates(
    model: Transformer, memory: Tensor, src_key_padding_mask: Tensor, prefix: list[int], top_k: int
) -> list[tuple[list[int], float]]:
    probs = _next_log_probs(model, memory, src_key_padding_mask, [prefix])[0].exp()  # (V,)
    probs[: len(SPECIAL_TOKENS)] = 0.0  # a mask stands for text, never for <pad>, </s>, <mask>, ...
    top = probs.topk(min(top_k, probs.numel() - len(SPECIAL_TOKENS)))
    return [([i], p) for i, p in zip(top.indices.tolist(), top.values.tolist())]


def _span_candidates(
    model: Transformer,
    memory: Tensor,
    src_key_padding_mask: Tensor,
    prefix: list[int],
    top_k: int,
    max_tokens: int,
    beam: int,
    anchor: int | None,
) -> list[tuple[list[int], float]]:
    """Beam over the span behind one <mask>; a span ends when the next token is `anchor` (</s> when the mask
    is followed by another mask, which span noise never produces)."""
    end = anchor if anchor is not None else model.config.eos_id
    live: list[tuple[list[int], float]] = [([], 0.0)]  # (span so far, log-prob)
    finished: list[tuple[list[int], float]] = []
    for length in range(max_tokens + 1):
        logp = _next_log_probs(model, memory, src_key_padding_mask, [prefix + s for s, _ in live])  # (n, V)
        if length > 0:  # a span is never empty
            finished += [(s, lp + float(logp[i, end])) for i, (s, lp) in enumerate(live)]
        if length == max_tokens:
            break
        logp[:, : len(SPECIAL_TOKENS)] = float("-inf")  # a span is text: no </s>, <mask>, ...
        logp[:, end] = float("-inf")  # and it goes on: a span that ends here is finished above
        total = torch.tensor([lp for _, lp in live], device=logp.device)[:, None] + logp  # (n, V)
        top = total.view(-1).topk(min(beam, total.numel()))
        V = logp.size(1)
        live = [
            (live[i // V][0] + [i % V], v)
            for i, v in zip(top.indices.tolist(), top.values.tolist())
            if v > float("-inf")
        ]
        if not live:
            break
    finished.sort(key=lambda c: c[1], reverse=True)
    return [(s, math.exp(lp)) for s, lp in finished[:top_k]]


def _candidate_dict(
    tokenizer: Tokenizer, text: str, span: tuple[int, int], ids: list[int], p: float, as_span: bool
) -> dict[str, Any]:
    piece = tokenizer.decode(ids)
    start, stop = span
    if piece[:1].isspace():  # "<mask>" absorbs the spaces before it (lstrip), as the fill's own space does
        start = len(text[:start].rstrip(" "))
    return {
        "score": p,
        "token": ids if as_span else ids[0],
        "token_str": piece.strip(),
        "sequence": text[:start] + piece + text[stop:],
    }
