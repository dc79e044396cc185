"""Inference tasks on the `inference` queue: translate, fill-mask, attention maps, embedding neighbours.

Each returns a JSON-ready dict; a problem the caller should see comes back as {"error": {"status", "detail"}}
and the API answers with that status. Translations from concurrent requests are decoded together by one
micro-batcher per process (run this worker with a thread pool: `-P threads -c 16`).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import torch
from celery import shared_task

from app.settings import get_settings
from app.task_names import ATTENTION, FILL_MASK, NEIGHBORS, TRANSLATE
from model.compile import eager_on_failure
from model.fill_mask import fill_mask
from model.inference import capture_attention, embedding_neighbors, translate
from model.tokenizer import readable_token
from worker.serving import ct2
from worker.serving.cache import LoadedModel, ModelCache
from worker.serving.ct2 import CT2Translator
from worker.serving.errors import RequestError
from worker.serving.microbatch import MicroBatcher

log = logging.getLogger(__name__)
SENTENCE_END = re.compile(r"(?<=[.!?;:。！？])\s+")
SPAN_DENOISING_MAX_TOKENS = 6  # longest span a <mask> of a span-denoising model is filled with


# Inference tasks are many and short: no per-task monitoring events (received/started/succeeded, three broker
# writes each, about 3 ms of worker CPU per request); /metrics counts them in the API instead. Training tasks keep
# their events for Flower. Answers go through the result backend; a lost message is simply a 504.
INFERENCE_TASK = {"ignore_result": False, "acks_late": False, "send_events": False}


_cache: ModelCache | None = None
_batcher: MicroBatcher | None = None
batch_sizes: list[int] = []  # recent micro-batch sizes, for tests and metrics


def cache() -> ModelCache:
    global _cache
    if _cache is None:
        _cache = ModelCache(get_settings().inference_cache_models)
    return _cache


def batcher() -> MicroBatcher:
    global _batcher
    if _batcher is None:
        settings = get_settings()
        _batcher = MicroBatcher(
            _translate_batch,
            settings.inference_max_batch,
            settings.inference_batch_wait_ms / 1000,
            on_batch=_note_batch,
        )
    return _batcher


def _note_batch(size: int) -> None:
    log.info("decoded a micro-batch of %d sentences", size)
    batch_sizes.append(size)
    del batch_sizes[:-1000]


_ct2: dict[str, CT2Translator] = {}  # by model id and sha256, built on the batching thread only


def _ct2_translator(loaded: LoadedModel) -> CT2Translator:
    key = f"{loaded.model_id}:{loaded.meta['sha256']}"
    if key not in _ct2:
        _ct2.clear()  # keep one converted model loaded; the PyTorch cache bounds the rest
        try:
            _ct2[key] = CT2Translator(loaded)
        except Exception as exc:  # conversion or loading: whatever CTranslate2 raises, ValueError included
            raise _backend_failed("ctranslate2", loaded.model_id, exc) from exc
    return _ct2[key]


def _backend_failed(backend: str, model_id: str, exc: Exception) -> RequestError:
    """A decoding backend broke (not the request): 503 naming it, so clients retry or pick the other backend."""
    log.error("model %s: backend %r failed: %s: %s", model_id, backend, type(exc).__name__, exc, exc_info=exc)
    return RequestError(503, f"inference backend {backend!r} failed on model {model_id}: {type(exc).__name__}: {exc}")


def _translate_batch(key: tuple, texts: list[str]) -> list[dict[str, Any]]:
    model_id, beam_size, n_best, max_length, return_alignment, backend = key
    loaded = cache().get(model_id)
    try:
        return _decode(loaded, texts, beam_size, n_best, max_length, return_alignment, backend)
    except (RequestError, ValueError):  # the request's fault (ValueError names its bad value): 4xx
        raise
    except Exception as exc:
        raise _backend_failed(backend, model_id, exc) from exc


def _decode(
    loaded: LoadedModel,
    texts: list[str],
    beam_size: int,
    n_best: int,
    max_length: int | None,
    return_alignment: bool,
    backend: str,
) -> list[dict[str, Any]]:
    if backend == "ctranslate2":
        return _ct2_translator(loaded).translate(texts, beam_size, n_best, max_length, return_alignment)
    with torch.inference_mode():
        return eager_on_failure(  # SERVING_COMPILE: a compiler failure serves this request (and later ones) eagerly
            loaded.model,
            lambda: translate(
                loaded.model,
                loaded.tokenizer,
                texts,
                beam_size=beam_size,
                n_best=n_best,
                max_len_a=0.0 if max_length else 2.0,
                max_len_b=max_length or 10,
                return_alignment=return_alignment,
            ),
            keep=(RequestError, ValueError),
        )


def _pieces(loaded: LoadedModel, text: str) -> list[str]:
    """The text itself, or its sentences when it is longer than the model's maximum length."""
    limit = loaded.model.config.max_positions - 1  # room for </s>
    if len(loaded.tokenizer.encode(text)) <= limit:
        return [text]
    pieces = [p for p in SENTENCE_END.split(text.strip()) if p]
    for piece in pieces:
        n = len(loaded.tokenizer.encode(piece))
        if n > limit:
            raise RequestError(
                422,
                f"a sentence of {n} tokens is longer than the model's maximum of {limit} "
                f"tokens and cannot be split further: {piece[:60]!r}",
            )
    return pieces


def _public_translation(result: dict[str, Any], n_best: int, return_alignment: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"text": result["text"], "score": result["score"]}
    if n_best > 1:
        out["alternatives"] = [{"text": a["text"], "score": a["score"]} for a in result.get("alternatives", [])]
    if return_alignment:
        out["alignment"] = {
            "source_tokens": [readable_token(t) for t in result["source_tokens"]],
            "target_tokens": [readable_token(t) for t in result["tokens"]],
            "pairs": [[t, s] for t, s in enumerate(result["alignment"])],
        }
    return out


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One translation from the translations of a text's sentences."""
    return {
        "text": " ".join(p["text"] for p in parts),
        "score": sum(p["score"] for p in parts) / len(parts),
        "split": True,
        "pieces": len(parts),
    }


def errors_as_results(fn):
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RequestError as exc:  # ModelUnavailable too
            return {"error": {"status": exc.status, "detail": exc.detail}}
        except ValueError as exc:  # the model library names the bad value
            return {"error": {"status": 422, "detail": str(exc)}}

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


def _translation_model(model_id: str) -> LoadedModel:
    loaded = cache().get(model_id)
    if loaded.objective != "translation":
        raise RequestError(422, f"model {model_id} was trained for {loaded.objective}, not translation")
    return loaded


@shared_task(name=TRANSLATE, **INFERENCE_TASK)
@errors_as_results
def translate_task(
    model_id: str,
    texts: list[str],
    beam_size: int = 4,
    n_best: int = 1,
    max_length: int | None = None,
    return_alignment: bool = False,
    backend: str = "pytorch",
) -> dict[str, Any]:
    started = time.perf_counter()
    loaded = _translation_model(model_id)
    if backend == "ctranslate2" and not ct2.available():
        raise RequestError(
            422,
            "backend 'ctranslate2' is not installed on the inference workers (pip install ctranslate2 transformers)",
        )
    if n_best > beam_size:
        raise RequestError(422, f"n_best={n_best} cannot exceed beam_size={beam_size}")
    plans = [_pieces(loaded, text) for text in texts]
    flat = [piece for plan in plans for piece in plan]
    results, batch_size = batcher().submit_sized(
        (model_id, beam_size, n_best, max_length, return_alignment, backend), flat
    )
    translations, start = [], 0
    for plan in plans:
        parts = results[start : start + len(plan)]
        start += len(plan)
        translations.append(
            _public_translation(parts[0], n_best, return_alignment) if len(plan) == 1 else _merge(parts)
        )
    return {
        "translations": translations,
        "model_id": model_id,
        "backend": backend,
        "compute_ms": round((time.perf_counter() - started) * 1000, 2),
        "batch_size": batch_size,
    }  # for the API's metrics; not part of the public answer


@shared_task(name=FILL_MASK, **INFERENCE_TASK)
@errors_as_results
def fill_mask_task(model_id: str, text: str, top_k: int = 5) -> dict[str, Any]:
    loaded = cache().get(model_id)
    if loaded.objective != "denoising":
        raise RequestError(
            422, f"model {model_id} was trained for {loaded.objective}; fill-mask needs a denoising model"
        )
    span = SPAN_DENOISING_MAX_TOKENS if loaded.noise == "span" else 1
    offsets = [m.start() for m in re.finditer(re.escape("<mask>"), text)]
    with torch.inference_mode():
        per_mask = eager_on_failure(
            loaded.model,
            lambda: fill_mask(loaded.model, loaded.tokenizer, text, top_k=top_k, max_span_tokens=span),
            keep=(RequestError, ValueError),
        )
    return {
        "model_id": model_id,
        "masks": [
            {
                "position": i,
                "char_offset": offsets[i],
                "candidates": [
                    {"token": c["token_str"], "score": c["score"], "sequence": c["sequence"]} for c in cands
                ],
            }
            for i, cands in enumerate(per_mask)
        ],
    }


@shared_task(name=ATTENTION, **INFERENCE_TASK)
@errors_as_results
def attention_task(model_id: str, text: str, target: str | None = None) -> dict[str, Any]:
    loaded = cache().get(model_id)
    with torch.inference_mode():
        result = capture_attention(loaded.model, loaded.tokenizer, text, target)
    for name in ("source_tokens", "target_tokens"):
        result[name] = [readable_token(t) for t in result[name]]
    return {"model_id": model_id, **result}


@shared_task(name=NEIGHBORS, **INFERENCE_TASK)
@errors_as_results
def neighbors_task(model_id: str, token: str, k: int = 10) -> dict[str, Any]:
    loaded = cache().get(model_id)
    with torch.inference_mode():
        found = embedding_neighbors(loaded.model, loaded.tokenizer, token, k)
    return {
        "model_id": model_id,
        "token": token,
        "neighbors": [
            {"token": readable_token(n["token"]), "id": n["id"], "similarity": n["similarity"]} for n in found
        ],
    }
