"""Inference tasks on the `inference` queue: translate, fill-mask, attention maps, embedding neighbours.

Each returns a JSON-ready dict; a problem the caller should see comes back as {"error": {"status", "detail"}}
and the API answers with that status. A task checks the request before it decodes (a fault of the request is a
4xx naming the bad value); whatever the backend (PyTorch or CTranslate2) raises while decoding is a 503 naming
the backend, logged with its traceback. Translations go to CTranslate2 by default, to PyTorch where it cannot serve
them (worker/serving/translation.py); the rest is PyTorch's alone. Translations from concurrent requests are decoded
together by one micro-batcher per process (run this worker with a thread pool: `-P threads -c 16`).
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, ParamSpec, TypeVar

import torch
from celery import shared_task

from app.core.settings import get_settings
from app.core.task_names import ATTENTION, FILL_MASK, GEOMETRY, NEIGHBORS, TRANSLATE
from model.data.tokenizer import readable_token
from model.decode.fill_mask import fill_mask
from model.decode.glossary import Glossary
from model.decode.queries import capture_attention, embedding_neighbors, resolve_token, source_ids
from model.nn.compile import eager_on_failure
from model.probes.geometry import weight_geometry
from worker.device import worker_device
from worker.serving import translation
from worker.serving.decode_limits import micro_batch
from worker.serving.errors import RequestError, decoding
from worker.serving.glossary_terms import compiled_glossary, with_terms
from worker.serving.memories import memories
from worker.serving.microbatch import MicroBatcher
from worker.serving.model_cache import LoadedModel, ModelCache
from worker.serving.target_tokens import check_target, tagged
from worker.serving.translation_answers import merge, plans, public_translation

log = logging.getLogger(__name__)
SPAN_DENOISING_MAX_TOKENS = 6  # longest span a <mask> of a span-denoising model is filled with
MASK = "<mask>"
T = TypeVar("T")
P = ParamSpec("P")
# What translations decoded in one batch share: model_id, beam_size, n_best, max_length, return_alignment,
# return_token_probs, backend.
BatchKey = tuple[str, int, int, int | None, bool, bool, str]


# Inference tasks are many and short: no per-task monitoring events (received/started/succeeded, three broker
# writes each, about 3 ms of worker CPU per request); /metrics counts them in the API instead. Training tasks keep
# their events for Flower. Answers go through the result backend; a lost message is simply a 504.
INFERENCE_TASK = {"ignore_result": False, "acks_late": False, "send_events": False}


_cache: ModelCache | None = None
_batcher: MicroBatcher[BatchKey] | None = None
batch_sizes: list[int] = []  # recent micro-batch sizes, for tests and metrics


def cache() -> ModelCache:
    global _cache
    if _cache is None:
        _cache = ModelCache(get_settings().inference_cache_models)
    return _cache


def batcher() -> MicroBatcher[BatchKey]:
    global _batcher
    if _batcher is None:
        settings = get_settings()
        # INFERENCE_GIL_SWITCH_MS (0.5; Python's own: 5): on a GPU the batcher's thread launches kernels without
        # waiting for them, so it rarely lets the GIL go by itself, and every step of a request's way in (taking its
        # message, tokenizing, writing its answer) waited up to the switch interval at each turn.
        sys.setswitchinterval(settings.inference_gil_switch_ms / 1000)
        _batcher = MicroBatcher(
            _translate_batch,
            micro_batch(settings.inference_max_batch, worker_device()),
            settings.inference_batch_wait_ms / 1000,
            on_batch=_note_batch,
        )
    return _batcher


def _note_batch(size: int) -> None:
    log.debug("decoded a micro-batch of %d sentences", size)  # counted in /metrics: a line each would cost more
    batch_sizes.append(size)
    del batch_sizes[:-1000]


def _checked(check: Callable[[], T]) -> T:
    """A check of the caller's input, before decoding: a ValueError (the model library names the bad value) is
    the request's fault, a 422."""
    try:
        return check()
    except ValueError as exc:
        raise RequestError(422, str(exc)) from exc


def _translate_batch(key: BatchKey, texts: list[str]) -> list[dict[str, Any]]:
    """One micro-batch of pieces that translate_task checked (their length, n_best, the backend); each result
    says which backend made it (all of a batch's are made by one)."""
    model_id, beam_size, n_best, max_length, return_alignment, return_token_probs, backend = key
    loaded = cache().get(model_id)
    options = translation.Options(beam_size, n_best, max_length, return_alignment, return_token_probs)
    results, answered = translation.translate(loaded, texts, options, backend)
    return [{**result, "backend": answered} for result in results]


def errors_as_results(fn: Callable[P, dict[str, Any]]) -> Callable[P, dict[str, Any]]:
    """A request's fault as {"error": ...}; an answer with `compute_ms`, the milliseconds this task took on the
    worker (the API reports the rest of a request's time as the queue's: Server-Timing)."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            answer = fn(*args, **kwargs)
            answer.setdefault("compute_ms", round((time.perf_counter() - started) * 1000, 2))
            return answer
        except RequestError as exc:  # ModelUnavailable too
            return {"error": {"status": exc.status, "detail": exc.detail}}
        except ValueError as exc:  # the model library names the bad value
            return {"error": {"status": 422, "detail": str(exc)}}

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


def _check_beam(loaded: LoadedModel, beam_size: int) -> None:
    widest = loaded.model.config.vocab_size // 2
    if not 1 <= beam_size <= widest:
        raise RequestError(422, f"beam_size={beam_size} must be in [1, {widest}] (half this model's vocabulary)")


def _translation_model(model_id: str) -> LoadedModel:
    loaded = cache().get(model_id)
    if loaded.objective != "translation":
        raise RequestError(422, f"model {model_id} was trained for {loaded.objective}, not translation")
    return loaded


@shared_task(name=TRANSLATE, **INFERENCE_TASK)  # type: ignore[untyped-decorator]  # celery ships no types
@errors_as_results
def translate_task(
    model_id: str,
    texts: list[str],
    beam_size: int = 4,
    n_best: int = 1,
    max_length: int | None = None,
    return_alignment: bool = False,
    backend: str = "auto",
    return_token_probs: bool = False,
    memory: dict[str, Any] | None = None,
    glossary: dict[str, Any] | None = None,
    target_language: str | None = None,
) -> dict[str, Any]:
    """`memory` ({"dataset_id", "min_score", "max_matches", "replace_at"}, app/schemas/inference.MemoryRequest):
    each text's matches in that translation memory; a text whose best match scores replace_at or more is answered
    with it and not decoded. `glossary` ({"entries": [[source, target], ...], "case_sensitive"}): each source term
    found in a text gets its target term in the machine translation (model/decode/glossary.py). `target_language`:
    a model of several pairs translates into it, its token put before each text (model/data/language_pairs.py)."""
    started = time.perf_counter()
    loaded = _translation_model(model_id)
    backend = translation.resolve(backend)
    if n_best > beam_size:
        raise RequestError(422, f"n_best={n_best} cannot exceed beam_size={beam_size}")
    _check_beam(loaded, beam_size)
    check_target(loaded, target_language)
    if max_length is not None:  # as the PyTorch decoder bounds it, so both backends take the same lengths
        max_length = min(max_length, loaded.model.config.max_positions)
    terms = compiled_glossary(loaded, glossary) if glossary else None
    matches = _memory_matches(memory, texts) if memory else None
    replace_at = memory.get("replace_at") if memory else None
    kept = [m[0] if m and replace_at is not None and m[0]["score"] >= replace_at else None for m in matches or []]
    to_decode = [t for i, t in enumerate(texts) if not kept or kept[i] is None]
    decoded: list[dict[str, Any]] = []
    answered, batch_size = "memory", 0
    if to_decode:
        key = (model_id, beam_size, n_best, max_length, return_alignment, return_token_probs, backend)
        decoded, answered, batch_size = _decode(loaded, key, to_decode, terms, target_language)
    machine = iter(decoded)
    translations = []
    for i in range(len(texts)):
        found = kept[i] if kept else None
        out = {"text": found["target"], "origin": "memory", "score": None} if found else next(machine)
        if matches is not None:
            out["memory_matches"] = matches[i]
        translations.append(out)
    return {
        "translations": translations,
        "model_id": model_id,
        "backend": answered,  # the one that answered: a request is never split across batches
        "compute_ms": round((time.perf_counter() - started) * 1000, 2),
        "batch_size": batch_size,
    }  # for the API's metrics; not part of the public answer


def _decode(
    loaded: LoadedModel, key: BatchKey, texts: list[str], terms: Glossary | None = None, target: str | None = None
) -> tuple[list[dict[str, Any]], str, int]:
    """The texts' public translations (each split into sentences where longer than the model takes), with the
    glossary's terms where one is given, the backend that made them, and the size of the micro-batch they were
    decoded in. `target`: each sentence begins with that language's token (a model of several pairs)."""
    _, _, n_best, _, return_alignment, _, _ = key
    pieces = plans(loaded, texts, reserve=0 if target is None else 1)
    flat = tagged([piece for plan in pieces for piece in plan], target)
    results, batch_size = batcher().submit_sized(key, flat)
    if terms is not None:
        results = decoding("pytorch", loaded.model_id, lambda: with_terms(loaded, terms, flat, results))
    translations, start = [], 0
    for plan in pieces:
        parts = results[start : start + len(plan)]
        start += len(plan)
        translations.append(public_translation(parts[0], n_best, return_alignment) if len(plan) == 1 else merge(parts))
    return translations, results[0]["backend"], batch_size


def _memory_matches(memory: dict[str, Any], texts: list[str]) -> list[list[dict[str, Any]]]:
    """Each text's matches in the memory, best first, as the API shows them."""
    found = memories().get(memory["dataset_id"])
    try:
        return [
            [asdict(m) for m in found.lookup(text, memory.get("min_score", 75.0), memory.get("max_matches", 3))]
            for text in texts
        ]
    except ImportError as exc:  # a host whose image lacks it (bench/gpu_wheels.sh leaves it out)
        raise RequestError(
            503, "translation memories need rapidfuzz on the inference workers: pip install rapidfuzz"
        ) from exc


def _check_fill_mask(loaded: LoadedModel, text: str, top_k: int) -> None:
    """The request's faults that fill_mask would find: no <mask>, one the tokenizer does not read as a mask token,
    too long a text, top_k below 1."""
    if top_k < 1:
        raise RequestError(422, f"top_k={top_k} must be >= 1")
    ids = _checked(lambda: source_ids(loaded.model, loaded.tokenizer, text))
    found, written = ids.count(loaded.tokenizer.mask_id), text.count(MASK)
    if found == 0:
        raise RequestError(422, f"text has no {MASK} to fill: {text[:80]!r}")
    if found != written:
        raise RequestError(422, f"found {written} {MASK!r} in the text but {found} mask tokens: {text[:80]!r}")


@shared_task(name=FILL_MASK, **INFERENCE_TASK)  # type: ignore[untyped-decorator]  # celery ships no types
@errors_as_results
def fill_mask_task(model_id: str, text: str, top_k: int = 5) -> dict[str, Any]:
    loaded = cache().get(model_id)
    if loaded.objective != "denoising":
        raise RequestError(
            422, f"model {model_id} was trained for {loaded.objective}; fill-mask needs a denoising model"
        )
    _check_fill_mask(loaded, text, top_k)
    span = SPAN_DENOISING_MAX_TOKENS if loaded.noise == "span" else 1
    offsets = [m.start() for m in re.finditer(re.escape(MASK), text)]

    def decode() -> list[list[dict[str, Any]]]:
        with torch.inference_mode():
            return eager_on_failure(
                loaded.model,
                lambda: fill_mask(loaded.model, loaded.tokenizer, text, top_k=top_k, max_span_tokens=span),
                keep=(RequestError,),
            )

    per_mask = decoding("pytorch", model_id, decode)
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


def _check_attention(loaded: LoadedModel, text: str, target: str | None) -> None:
    """The request's faults that capture_attention would find: a source or target longer than the model takes."""
    _checked(lambda: source_ids(loaded.model, loaded.tokenizer, text))
    if target is None:
        return
    n, limit = len(loaded.tokenizer.encode(target)) + 1, loaded.model.config.max_positions
    if n > limit:
        raise RequestError(422, f"target has {n} tokens (with <s>), more than max_positions={limit}: {target[:60]!r}")


@shared_task(name=ATTENTION, **INFERENCE_TASK)  # type: ignore[untyped-decorator]  # celery ships no types
@errors_as_results
def attention_task(model_id: str, text: str, target: str | None = None) -> dict[str, Any]:
    loaded = cache().get(model_id)
    _check_attention(loaded, text, target)

    def decode() -> dict[str, Any]:
        with torch.inference_mode():
            return capture_attention(loaded.model, loaded.tokenizer, text, target)

    result = decoding("pytorch", model_id, decode)
    for name in ("source_tokens", "target_tokens"):
        result[name] = [readable_token(t) for t in result[name]]
    return {"model_id": model_id, **result}


@shared_task(name=NEIGHBORS, **INFERENCE_TASK)  # type: ignore[untyped-decorator]  # celery ships no types
@errors_as_results
def neighbors_task(model_id: str, token: str, k: int = 10) -> dict[str, Any]:
    loaded = cache().get(model_id)
    if k < 1:
        raise RequestError(422, f"k={k} must be >= 1")
    _checked(lambda: resolve_token(loaded.tokenizer, token))  # a token the vocabulary lacks, named

    def search() -> list[dict[str, Any]]:
        with torch.inference_mode():
            return embedding_neighbors(loaded.model, loaded.tokenizer, token, k)

    found = decoding("pytorch", model_id, search)
    return {
        "model_id": model_id,
        "token": token,
        "neighbors": [
            {"token": readable_token(n["token"]), "id": n["id"], "similarity": n["similarity"]} for n in found
        ],
    }


@shared_task(name=GEOMETRY, **INFERENCE_TASK)  # type: ignore[untyped-decorator]  # celery ships no types
@errors_as_results
def geometry_task(model_id: str) -> dict[str, Any]:
    """Shapes, storage and subspace overlaps of the embedding and attention projections (model/probes/geometry.py)."""
    loaded = cache().get(model_id)
    return {"model_id": model_id, **decoding("pytorch", model_id, lambda: weight_geometry(loaded.model))}
