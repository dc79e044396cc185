"""What users ask a trained model: translations (with n-best lists and alignments), attention maps and
embedding neighbours (masked-token fills: model/decode/fill_mask.py). Pure functions over (model, tokenizer)
returning plain JSON-ready lists and dicts; inputs follow the training convention (collate in model/data/batching.py:
source = ids + [</s>], decoder input = [<s>] + ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from model.data.batching import pad_sequences
from model.data.special_tokens import SPECIAL_TOKENS
from model.data.tokenizer import Tokenizer, byte_level_entry
from model.decode.batches import CPU_BATCH_SENTENCES, decode_batches
from model.decode.beam import Hypothesis, beam_search
from model.decode.greedy import eval_mode, greedy_decode
from model.decode.scoring import search_confidence
from model.nn.transformer import Transformer

AlignmentLayer = int | Literal["all"]
_BPE_SPACE = "\u0120"  # "Ġ": byte-level BPE's symbol for a leading space


def _device(model: Transformer) -> torch.device:
    return next(model.parameters()).device


def source_ids(model: Transformer, tokenizer: Tokenizer, text: str) -> list[int]:
    """The encoder's input for a text: its ids and </s>; ValueError when it is longer than the model takes."""
    return sources_ids(model, tokenizer, [text])[0]


def sources_ids(model: Transformer, tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """source_ids of each text, encoded in one call (which leaves the GIL to other threads)."""
    sources = [ids + [tokenizer.eos_id] for ids in tokenizer.encode_batch(texts)]
    for ids, text in zip(sources, texts):
        if len(ids) > model.config.max_positions:
            raise ValueError(
                f"source has {len(ids)} tokens (with </s>), more than max_positions="
                f"{model.config.max_positions}: {text[:60]!r}"
            )
    return sources


def _check_texts(texts: Sequence[str]) -> None:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"texts must be a list of strings, got {texts!r:.80}")


# -- translation ----------------------------------------------------------------------------------------------


def translate(
    model: Transformer,
    tokenizer: Tokenizer,
    texts: Sequence[str],
    beam_size: int = 4,
    n_best: int = 1,
    alpha: float = 0.6,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
    return_alignment: bool = False,
    alignment_layer: AlignmentLayer = -1,
    batch_size: int = CPU_BATCH_SENTENCES,
    max_beam_tokens: int | None = None,
) -> list[dict[str, Any]]:
    """Beam-search translations of texts, in order: one dict per text.

    {"text", "score", "log_prob", "confidence", "scored_tokens", "tokens"}: the best hypothesis (score = log-prob /
    GNMT length penalty, see model.decode.beam; confidence = exp(log_prob / scored_tokens), see
    model.decode.scoring; tokens are vocabulary strings, without <s> and </s>); with n_best > 1, "alternatives":
    the next n_best - 1 hypotheses as the same dicts. With return_alignment, "source_tokens" and
    "alignment": for target token i, the index into source_tokens it attends to most (see align()).
    Texts are batched by length, at most batch_size and max_beam_tokens (beam x sentences x longest source) at a
    time (model/decode/batches.py); a batch the device has no memory for is decoded in two halves.
    """
    _check_texts(texts)
    if return_alignment:
        _check_layer(model, alignment_layer)
    sources = sources_ids(model, tokenizer, texts)
    batches = decode_batches([len(s) for s in sources], batch_size, beam_size, max_beam_tokens)
    nbest: list[list[Hypothesis]] = [[] for _ in texts]

    def decode(idx: list[int]) -> None:
        src = pad_sequences([sources[i] for i in idx], model.config.pad_id).to(_device(model))
        try:
            found = beam_search(model, src, beam_size, n_best, alpha, max_len_a, max_len_b)
        except torch.OutOfMemoryError:
            if len(idx) == 1:
                raise
            del src
            torch.cuda.empty_cache()
            half = len(idx) // 2
            decode(idx[:half])
            decode(idx[half:])
            return
        for i, hyps in zip(idx, found):
            nbest[i] = hyps

    for batch in batches:
        decode(batch)
    results = []
    for src_ids, hyps in zip(sources, nbest):
        result = _hypothesis_dict(tokenizer, hyps[0])
        if n_best > 1:
            result["alternatives"] = [_hypothesis_dict(tokenizer, h) for h in hyps[1:]]
        if return_alignment:
            result["source_tokens"] = [tokenizer.id_to_token(t) for t in src_ids[:-1]]
            result["alignment"] = align(model, src_ids, hyps[0].tokens, alignment_layer)
        results.append(result)
    return results


def _hypothesis_dict(tokenizer: Tokenizer, h: Hypothesis) -> dict[str, Any]:
    return {
        "text": tokenizer.decode(h.tokens),
        "score": h.score,
        "log_prob": h.log_prob,
        "confidence": search_confidence(h.log_prob, len(h.tokens), h.finished),
        "scored_tokens": len(h.tokens) + int(h.finished),  # the log-probabilities log_prob sums
        "tokens": [tokenizer.id_to_token(t) for t in h.tokens],
    }


def _check_layer(model: Transformer, layer: AlignmentLayer) -> None:
    n_layers = model.config.n_decoder_layers
    is_index = isinstance(layer, int) and not isinstance(layer, bool) and -n_layers <= layer < n_layers
    if layer != "all" and not is_index:
        raise ValueError(f"alignment layer={layer!r} must be 'all' or an int in [-{n_layers}, {n_layers})")


@torch.inference_mode()
def align(
    model: Transformer, src_ids: Sequence[int], tgt_ids: Sequence[int], layer: AlignmentLayer = -1
) -> list[int | None]:
    """Hard alignment from cross-attention: for each target token, the source position with the highest
    weight, averaged over the heads of decoder layer `layer` (default the last) or over all layers ("all").

    src_ids end with </s>; tgt_ids exclude <s> and </s>. Target token i is the output at decoder position i
    (input [<s>] + tgt_ids[:-1]), so its row is the attention that predicted it. The source </s> is left out, as
    fairseq's alignments do, so every index points at a real source token (None for an empty source).
    """
    _check_layer(model, layer)
    if len(src_ids) < 2:  # nothing but </s>: no source token to point at
        return [None] * len(tgt_ids)
    if not tgt_ids:
        return []
    device = _device(model)
    src = torch.tensor([list(src_ids)], device=device)  # (1, S)
    # (1, T): the input that predicted each target token; the last token's own position is never needed (causal),
    # and a translation that fills max_positions leaves no room for it
    tgt_in = torch.tensor([[model.config.bos_id, *tgt_ids[:-1]]], device=device)
    with eval_mode(model):
        _, weights = model.forward_with_attention(src, tgt_in)
    chosen = weights.cross if layer == "all" else [weights.cross[layer]]
    mean = torch.stack([w[0] for w in chosen]).mean(dim=(0, 1))  # (T, S), over layers and heads
    return mean[: len(tgt_ids), : len(src_ids) - 1].argmax(dim=-1).tolist()


# -- attention maps -------------------------------------------------------------------------------------------


@torch.inference_mode()
def capture_attention(
    model: Transformer, tokenizer: Tokenizer, source: str, target: str | None = None, decimals: int = 4
) -> dict[str, Any]:
    """Every layer's and head's attention weights (softmax(QK^T / sqrt(d_k)), Eq. 1) for one sentence pair.

    Without a target, the model's greedy translation is used (and returned as "target"). Returns
    {"source", "target", "source_tokens" (with the final </s>), "target_tokens" (the decoder input: <s> first),
    "encoder_self": [layer][head][query][key] over source tokens, "decoder_self": ... over target tokens,
    "cross": [layer][head][target position][source position]}, weights rounded to `decimals` places.
    Decoder row i is the position that predicts target token i + 1 (the last one predicts </s>).
    """
    if not isinstance(source, str) or (target is not None and not isinstance(target, str)):
        raise ValueError("source and target must be strings")
    src_ids = source_ids(model, tokenizer, source)
    device = _device(model)
    src = torch.tensor([src_ids], device=device)  # (1, S)
    if target is None:
        tgt_ids = greedy_decode(model, src)[0]
        target = tokenizer.decode(tgt_ids)
    else:
        tgt_ids = tokenizer.encode(target)
    if len(tgt_ids) + 1 > model.config.max_positions:
        raise ValueError(
            f"target has {len(tgt_ids) + 1} tokens (with <s>), more than max_positions={model.config.max_positions}"
        )
    tgt_in = [model.config.bos_id, *tgt_ids]
    with eval_mode(model):
        _, weights = model.forward_with_attention(src, torch.tensor([tgt_in], device=device))

    def nested(ws: list[Tensor]) -> list[list[list[list[float]]]]:
        # float64 before rounding, so 0.0134 stays 0.0134 in JSON rather than float32's 0.013399999588...
        return torch.stack([w[0] for w in ws]).double().round(decimals=decimals).tolist()  # (L, H, T_q, T_k)

    return {
        "source": source,
        "target": target,
        "source_tokens": [tokenizer.id_to_token(t) for t in src_ids],
        "target_tokens": [tokenizer.id_to_token(t) for t in tgt_in],
        "encoder_self": nested(weights.encoder_self),
        "decoder_self": nested(weights.decoder_self),
        "cross": nested(weights.cross),
    }


# -- embeddings -----------------------------------------------------------------------------------------------


def resolve_token(tokenizer: Tokenizer, token: str | int) -> int:
    """Vocabulary id of `token`: an id, a vocabulary entry ("Ġcat"), or a word that is one token on its own
    ("cat") or after a space (" cat" -> "Ġcat"); ValueError naming it otherwise."""
    if isinstance(token, int) and not isinstance(token, bool):
        tokenizer.id_to_token(token)  # raises ValueError when out of range
        return token
    if not isinstance(token, str) or not token:
        raise ValueError(f"token must be a non-empty string or an id, got {token!r}")
    tried = []
    for candidate in dict.fromkeys((token, _BPE_SPACE + token, byte_level_entry(token))):  # last: as shown
        tried.append(candidate)
        try:
            return tokenizer.token_to_id(candidate)
        except ValueError:
            pass
    for text in (token, " " + token):  # spelled as text: let the byte-level mapping do the work (umlauts, ...)
        ids = tokenizer.encode(text)
        if len(ids) == 1:
            return ids[0]
    raise ValueError(f"token {token!r} is not in the vocabulary (tried {tried} and its text encodings)")


@torch.inference_mode()
def embedding_neighbors(
    model: Transformer, tokenizer: Tokenizer, token: str | int, k: int = 10
) -> list[dict[str, Any]]:
    """The k tokens closest to `token` by cosine similarity in the embedding matrix (the shared one, Sec. 3.4;
    the source embeddings when not shared), most similar first, as {"token", "id", "similarity"}.
    The token itself and the special tokens are left out. See resolve_token for how `token` is read."""
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    token_id = resolve_token(tokenizer, token)
    weight = model.encoder.embed_tokens.weight  # the shared matrix when share_embeddings
    unit = F.normalize(weight.float(), dim=-1)  # (V, d_model)
    sims = unit @ unit[token_id]  # (V,)
    sims[token_id] = float("-inf")
    sims[: len(SPECIAL_TOKENS)] = float("-inf")
    n = min(k, sims.numel() - len(SPECIAL_TOKENS) - (token_id >= len(SPECIAL_TOKENS)))
    top = sims.topk(n)
    return [
        {"token": tokenizer.id_to_token(i), "id": i, "similarity": round(s, 6)}
        for i, s in zip(top.indices.tolist(), top.values.tolist())
    ]
