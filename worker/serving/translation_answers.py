"""A translation task's answer from its results: texts longer than the model takes split into sentences (`plans`)
and joined again (`merge`), and each result shaped as the API shows it (`public_translation`, `token_probs`)."""

from __future__ import annotations

import math
import re
from typing import Any

from model.data.special_tokens import SPECIAL_TOKENS
from model.data.tokenizer import readable_token
from model.decode.scoring import confidence
from worker.serving.errors import RequestError
from worker.serving.model_cache import LoadedModel

SENTENCE_END = re.compile(r"(?<=[.!?;:。！？])\s+")
EOS_TOKEN = SPECIAL_TOKENS[2]  # "</s>": the last of a translation's token probabilities


def plans(loaded: LoadedModel, texts: list[str], reserve: int = 0) -> list[list[str]]:
    """Each text itself, or its sentences when it is longer than the model's maximum length less `reserve` tokens
    (a target-language token put before each). The texts are encoded in one call, which leaves the GIL to the
    worker's other threads (encoding them one by one held it: a tenth of the decoding thread's and a seventh of the
    request threads' time under 8 clients on an H200)."""
    limit = loaded.model.config.max_positions - 1 - reserve  # room for </s>
    lengths = [len(ids) for ids in loaded.tokenizer.encode_batch(texts)]
    return [[text] if n <= limit else sentences(loaded, text, limit) for text, n in zip(texts, lengths)]


def sentences(loaded: LoadedModel, text: str, limit: int) -> list[str]:
    pieces = [p for p in SENTENCE_END.split(text.strip()) if p]
    for piece, ids in zip(pieces, loaded.tokenizer.encode_batch(pieces)):
        if len(ids) > limit:
            raise RequestError(
                422,
                f"a sentence of {len(ids)} tokens is longer than the model's maximum of {limit} "
                f"tokens and cannot be split further: {piece[:60]!r}",
            )
    return pieces


def public_translation(result: dict[str, Any], n_best: int, return_alignment: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"text": result["text"], "score": result["score"], "confidence": result["confidence"]}
    if "token_log_probs" in result:  # their geometric mean replaces the search's (the same up to rounding)
        out.update(token_probs(result["tokens"], result["token_log_probs"]))
    if "glossary_terms" in result:
        out["glossary_terms"] = result["glossary_terms"]
    if n_best > 1:
        out["alternatives"] = [{"text": a["text"], "score": a["score"]} for a in result.get("alternatives", [])]
    if return_alignment:
        out["alignment"] = {
            "source_tokens": [readable_token(t) for t in result["source_tokens"]],
            "target_tokens": [readable_token(t) for t in result["tokens"]],
            "pairs": [[t, s] for t, s in enumerate(result["alignment"])],
        }
    return out


def token_probs(tokens: list[str], log_probs: list[float]) -> dict[str, Any]:
    """A translation's "token_probs" (each token's probability, then </s>'s unless it filled the model's length)
    and their geometric mean."""
    names = [readable_token(t) for t in tokens] + [EOS_TOKEN] * (len(log_probs) > len(tokens))
    return {
        "confidence": confidence(log_probs),
        "token_probs": [{"token": n, "prob": math.exp(lp)} for n, lp in zip(names, log_probs, strict=True)],
    }


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One translation from the translations of a text's sentences: confidence over all their tokens, token
    probabilities each sentence's in turn."""
    merged: dict[str, Any] = {
        "text": " ".join(p["text"] for p in parts),
        "score": sum(p["score"] for p in parts) / len(parts),
        "confidence": math.exp(sum(p["log_prob"] for p in parts) / sum(p["scored_tokens"] for p in parts)),
        "split": True,
        "pieces": len(parts),
    }
    if any("glossary_terms" in p for p in parts):
        merged["glossary_terms"] = [t for p in parts for t in p.get("glossary_terms", [])]
    if all("token_log_probs" in p for p in parts):
        probs = [token_probs(p["tokens"], p["token_log_probs"]) for p in parts]
        all_log_probs = [lp for p in parts for lp in p["token_log_probs"]]
        merged.update(confidence=confidence(all_log_probs), token_probs=[t for p in probs for t in p["token_probs"]])
    return merged
