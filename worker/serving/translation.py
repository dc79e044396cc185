"""Which backend translates: CTranslate2 by default wherever it serves the model, PyTorch where it cannot.

On a CPU, `small` at beam 4 in batches of 32, CTranslate2 decoded 2.56x (int8) and 1.69x (float32) as fast as
our beam search from the same weights, with 97.7% and 98.8% of outputs identical; on a GPU it decodes in float16
(worker/serving/ct2_device.py). So a request's backend "auto" (the default) means SERVING_BACKEND, and
SERVING_BACKEND=auto (its default) means: CTranslate2 if it is installed and the model converts and loads, else
PyTorch; and PyTorch for a batch that CTranslate2 fails mid-decode (logged with its traceback). A backend named
(in the request, or by SERVING_BACKEND) is that backend or a 503 naming it. Attention maps, fill-mask, neighbours
and anatomy are PyTorch's alone (worker/tasks/inference.py); alignments of a CTranslate2 translation come from the
PyTorch model's cross-attention over that translation (`align`).

On a GPU worker, auto means CTranslate2 only where CTranslate2 translates on that GPU: where it cannot (it sees no
GPU, its CUDA runtime fails, or a model loaded there fails the probe translation: no cuBLAS 12 on a CUDA 13 host)
it would serve from the worker's CPU, slower than PyTorch on the GPU, so auto is PyTorch there and `auto_backend`
says why (the heartbeat reports it). A request naming CTranslate2 is still served by it, on the CPU (logged once).

Every answer says which backend answered: the outputs may differ (CTranslate2's length penalty is len^alpha,
ours GNMT's; int8 and float16 round differently), so evaluations record theirs.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from app.core.settings import get_settings
from model.decode.queries import translate as beam_translate
from model.decode.sampling import Sampling, sample_translate
from model.decode.scoring import token_log_probs
from model.nn.compile import eager_on_failure
from worker.device import worker_device
from worker.serving import ct2
from worker.serving.ct2_device import place
from worker.serving.ct2_models import Ct2Models
from worker.serving.decode_limits import decode_limits
from worker.serving.errors import RequestError, backend_failed, decoding
from worker.serving.model_cache import LoadedModel

log = logging.getLogger(__name__)
PYTORCH, CTRANSLATE2, AUTO = "pytorch", "ctranslate2", "auto"
_ct2_models: Ct2Models | None = None
_ct2_models_lock = threading.Lock()
# By GPU ("cuda:0"): why CTranslate2 cannot translate on it, once this process has seen it (never forgotten: the
# process's CUDA libraries do not change).
_off_gpu: dict[str, str] = {}
_on_gpu: set[str] = set()  # GPUs whose CTranslate2 device count and compute types were found fine
_off_gpu_lock = threading.Lock()


def ct2_models() -> Ct2Models:
    """The process's CTranslate2 translators, as many models as INFERENCE_CACHE_MODELS (beside the PyTorch ones)."""
    global _ct2_models
    with _ct2_models_lock:
        if _ct2_models is None:
            _ct2_models = Ct2Models(get_settings().inference_cache_models)
        return _ct2_models


@dataclass(frozen=True)
class Options:
    beam_size: int = 4
    n_best: int = 1
    max_length: int | None = None  # most target tokens; None: 2 x source + 10
    return_alignment: bool = False
    return_token_probs: bool = False  # each best translation's "token_log_probs", by the backend that made it
    alpha: float = 0.6  # length penalty exponent
    sampling: Sampling | None = None  # draw each token (model/decode/sampling.py) rather than search: texts only


@dataclass(frozen=True)
class Auto:
    backend: str  # what SERVING_BACKEND=auto translates with on this worker: "ctranslate2" or "pytorch"
    note: str | None  # why it is not CTranslate2 on the worker's own device, where it is not


def auto_backend() -> Auto:
    """What `auto` means on this worker now, and why where that is not CTranslate2 on the worker's device."""
    setting = get_settings().serving_backend
    if setting == PYTORCH:
        return Auto(PYTORCH, "SERVING_BACKEND=pytorch")
    if not ct2.available():
        return Auto(PYTORCH, "CTranslate2 is not installed (pip install ctranslate2 transformers)")
    device = worker_device()
    why = _off_gpu_reason(device) if device.type == "cuda" else None
    if why is None:
        return Auto(CTRANSLATE2, None)
    if setting == CTRANSLATE2:
        return Auto(CTRANSLATE2, f"CTranslate2 cannot translate on {device} ({why}); SERVING_BACKEND=ctranslate2 "
                                 "keeps it, on the CPU")  # fmt: skip
    return Auto(PYTORCH, f"CTranslate2 cannot translate on {device} ({why}); PyTorch translates on {device}")


def _off_gpu_reason(device: torch.device) -> str | None:
    """Why CTranslate2 cannot translate on the GPU `device`: as a model's loading found it, or as CTranslate2's
    own device count and compute types tell (worker/serving/ct2_device.py); None while nothing says it cannot."""
    if str(device) in _off_gpu or str(device) in _on_gpu:
        return _off_gpu.get(str(device))
    import ctranslate2

    placed = place(
        device, get_settings().ct2_compute_type, ctranslate2.get_cuda_device_count,
        ctranslate2.get_supported_compute_types,
    )  # fmt: skip
    if placed.device == "cpu":
        note_off_gpu(device, placed.fallback or "CTranslate2 placed it on the CPU")
    else:
        _on_gpu.add(str(device))  # until a model loaded there fails the probe (note_off_gpu)
    return _off_gpu.get(str(device))


def note_off_gpu(device: torch.device, why: str) -> None:
    """Record (and log, the first time) that CTranslate2 cannot translate on the GPU `device`."""
    why = why.removesuffix("; serving on the CPU")
    with _off_gpu_lock:
        if str(device) in _off_gpu:
            return
        _off_gpu[str(device)] = why
    log.warning(
        "CTranslate2 cannot translate on %s (%s): translations leaving the backend to the service are made by "
        "PyTorch on %s; those naming backend 'ctranslate2' by CTranslate2 on the CPU",
        device, why, device,
    )  # fmt: skip


def resolve(requested: str) -> str:
    """What a request's backend means on this worker: "pytorch", "ctranslate2" (no fallback), or "auto"
    (CTranslate2, PyTorch where it cannot). auto is SERVING_BACKEND; where CTranslate2 is not installed, or on a
    GPU worker where it cannot translate on the GPU (auto_backend), it is "pytorch", so such requests share
    PyTorch's micro-batches. 422 for a backend that does not exist or CTranslate2 named where it is not
    installed."""
    backend = get_settings().serving_backend if requested == AUTO else requested
    if backend not in (AUTO, PYTORCH, CTRANSLATE2):
        raise RequestError(422, f"backend={requested!r} is not one of 'auto', 'pytorch', 'ctranslate2'")
    if backend == AUTO:
        return PYTORCH if auto_backend().backend == PYTORCH else AUTO
    if backend != PYTORCH and not ct2.available():
        raise RequestError(
            422,
            "backend 'ctranslate2' is not installed on the inference workers (pip install ctranslate2 transformers)",
        )
    return backend


def translate(
    loaded: LoadedModel, texts: list[str], options: Options, backend: str
) -> tuple[list[dict[str, Any]], str]:
    """The texts' translations (the dicts of model.decode.queries.translate) and the backend that made them, for
    `backend` as resolve() gives it. Texts are checked already: a failure here is the backend's (see above)."""
    if backend in (AUTO, CTRANSLATE2):
        translator = ct2_models().get(loaded, required=backend == CTRANSLATE2)
        if translator is not None and translator.off_gpu is not None:  # a GPU worker's CTranslate2 on its CPU
            note_off_gpu(worker_device(), translator.off_gpu)
            if backend == AUTO:
                translator = None  # PyTorch on the GPU: far faster than CTranslate2 on the CPU
        if translator is not None:
            try:
                results = translator.translate(
                    texts, options.beam_size, options.n_best, options.max_length, options.return_alignment,
                    options.alpha, options.sampling,
                )  # fmt: skip
                if options.return_token_probs:
                    _add_token_log_probs(loaded, texts, results, translator.token_log_probs)
                return results, CTRANSLATE2
            except Exception as exc:
                if backend == CTRANSLATE2:
                    raise backend_failed(CTRANSLATE2, loaded.model_id, exc) from exc
                log.error(
                    "model %s: backend 'ctranslate2' failed mid-decode (%s: %s); PyTorch translates these %d texts",
                    loaded.model_id, type(exc).__name__, exc, len(texts), exc_info=exc,
                )  # fmt: skip
    return decoding(PYTORCH, loaded.model_id, lambda: _pytorch(loaded, texts, options)), PYTORCH


def _add_token_log_probs(
    loaded: LoadedModel,
    texts: list[str],
    results: list[dict[str, Any]],
    score: Callable[[list[list[int]], list[list[int]]], list[list[float]]],
) -> None:
    """Give each result (its best translation) "token_log_probs": its tokens' and </s>'s, scored by `score`. A
    translation that fills the model's max_positions has no room for </s>: PyTorch scores its tokens alone
    (model/decode/scoring.py), as CTranslate2's score_batch, which always adds </s>, cannot."""
    tokenizer, limit = loaded.tokenizer, loaded.model.config.max_positions
    sources = [ids + [tokenizer.eos_id] for ids in tokenizer.encode_batch(texts)]
    targets = [[tokenizer.token_to_id(t) for t in r["tokens"]] for r in results]
    fits = [i for i, t in enumerate(targets) if len(t) < limit]
    full = [i for i, t in enumerate(targets) if len(t) >= limit]
    for indices, scorer in ((fits, score), (full, functools.partial(token_log_probs, loaded.model))):
        if indices:
            scored = scorer([sources[i] for i in indices], [targets[i] for i in indices])
            for i, log_probs in zip(indices, scored, strict=True):
                results[i]["token_log_probs"] = log_probs


def _pytorch(loaded: LoadedModel, texts: list[str], options: Options) -> list[dict[str, Any]]:
    limits = decode_limits(loaded.model, next(loaded.model.parameters()).device)
    if options.sampling is not None:
        sampled = sample_translate(loaded.model, loaded.tokenizer, texts, options.sampling, limits.max_sentences)
        return [{"text": text} for text in sampled]

    def search() -> list[dict[str, Any]]:
        results = beam_translate(
            loaded.model,
            loaded.tokenizer,
            texts,
            beam_size=options.beam_size,
            n_best=options.n_best,
            alpha=options.alpha,
            max_len_a=0.0 if options.max_length else 2.0,
            max_len_b=options.max_length or 10,
            return_alignment=options.return_alignment,
            batch_size=limits.max_sentences,
            max_beam_tokens=limits.max_beam_tokens,
        )
        if options.return_token_probs:
            score = functools.partial(token_log_probs, loaded.model, batch_size=limits.max_sentences)
            _add_token_log_probs(loaded, texts, results, score)
        return results

    with torch.inference_mode():
        # SERVING_COMPILE: a compiler failure serves this request (and later ones) eagerly
        return eager_on_failure(loaded.model, search, keep=(RequestError,))
