"""Models an inference worker loads when it starts (INFERENCE_WARM_MODELS), and what it reports that it serves.

Without them a model loads at its first request: 10-15 s on a GPU, plus CTranslate2's conversion. Once the worker
is ready, a background thread (start-up and the heartbeat go on meanwhile) resolves each reference (a model id,
`name@alias`, `name@version`: app/services/model_refs.resolve_any_owner), loads the model into the PyTorch models'
cache and, where `backend: auto` means CTranslate2 on this worker, its CTranslate2 translator too. Both caches pin
it: no other model evicts it. At most INFERENCE_CACHE_MODELS models are pinned (a warning says so); a reference
that names no model or fails to load is logged with the reason and reported, never a crash.

`report` is what the heartbeat writes in the worker's `serving` record: every model the caches hold (one loaded by
a request is warm too; pinned ones say so), what `auto` means here and why, and the references that failed. The
heartbeat runs in the worker's main process, so only a worker whose tasks run there too (`-P threads`, as the
embedded service and the docs run the inference worker) has its caches there to report; a prefork worker's models
live in its pool processes, and it says so instead of loading anything.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from app.core.settings import get_settings
from app.db.session import session_scope
from app.services.model_refs import resolve_any_owner
from worker.device import worker_device
from worker.serving import translation
from worker.serving.errors import RequestError
from worker.serving.model_cache import ModelCache
from worker.tasks import inference

log = logging.getLogger(__name__)
PREFORK_NOTE = (
    "a prefork worker's pool processes hold its models, which its heartbeat cannot see; run inference workers "
    "with a thread pool (-P threads) to load INFERENCE_WARM_MODELS and report them"
)


@dataclass
class Warmed:
    """One INFERENCE_WARM_MODELS reference, as far as it got."""

    ref: str
    model_id: str | None = None
    error: str | None = None


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: list[Warmed] = []
        self.warming = False
        self.in_process = True  # False on a prefork worker: its caches are not in this process


_state = State()


def warm_up(refs: list[str], cache: ModelCache, state: State = _state) -> list[Warmed]:
    """Load and pin the models `refs` name, in order, at most cache.capacity of them; returns each one's outcome."""
    with state.lock:
        state.results = [Warmed(ref) for ref in refs]
        state.warming = True
    if len(refs) > cache.capacity:
        log.warning(
            "INFERENCE_WARM_MODELS names %d models but INFERENCE_CACHE_MODELS=%d: only the first %d that load are "
            "kept warm", len(refs), cache.capacity, cache.capacity,
        )  # fmt: skip
    pinned: set[str] = set()
    try:
        for warmed in state.results:
            started = time.perf_counter()
            try:
                _warm(warmed, cache, pinned)
            except (LookupError, RequestError) as exc:  # no such model, or ModelUnavailable: its files, the store
                warmed.error = exc.detail if isinstance(exc, RequestError) else str(exc)
            except Exception as exc:  # whatever loading raises: reported, never the worker's end
                warmed.error = f"{type(exc).__name__}: {exc}"
                log.exception("warm model %s failed to load", warmed.ref)
            if warmed.error is not None:
                log.error("warm model %s not loaded: %s", warmed.ref, warmed.error)
            else:
                log.info("warm model %s (%s) loaded in %.0f ms", warmed.ref, warmed.model_id,
                         (time.perf_counter() - started) * 1000)  # fmt: skip
    finally:
        with state.lock:
            state.warming = False
    if len(pinned) == cache.capacity:
        log.warning(
            "the warm models take all %d cache slots (INFERENCE_CACHE_MODELS): any other model is loaded for each "
            "of its requests and not kept", cache.capacity,
        )  # fmt: skip
    return state.results


def _warm(warmed: Warmed, cache: ModelCache, pinned: set[str]) -> None:
    with session_scope() as session:
        model_id = resolve_any_owner(session, warmed.ref).id
    warmed.model_id = model_id
    if model_id not in pinned and len(pinned) >= cache.capacity:
        raise LookupError(
            f"no cache slot left: the {cache.capacity} slots (INFERENCE_CACHE_MODELS) are taken by the warm models "
            "before it"
        )
    cache.pin(model_id)  # before it is loaded: where the other slots are pinned, loading would evict it at once
    try:
        loaded = cache.get(model_id)
    except BaseException:
        cache.unpin(model_id)  # its slot stays free for the next reference, and for requests
        raise
    pinned.add(model_id)
    if loaded.objective != "translation" or translation.auto_backend().backend != translation.CTRANSLATE2:
        return
    ct2s = translation.ct2_models()
    ct2s.pin(model_id)
    translator = ct2s.get(loaded, required=False)  # None: it cannot convert or load (logged); PyTorch serves it
    if translator is not None and translator.off_gpu is not None:
        translation.note_off_gpu(worker_device(), translator.off_gpu)  # `auto` is PyTorch on the GPU from now


def start(in_process: bool, state: State = _state) -> None:
    """At the inference worker's start: warm INFERENCE_WARM_MODELS in a background thread, where this process
    serves (a thread pool); a prefork worker reports each reference as not loaded, saying why."""
    refs = get_settings().warm_model_refs
    state.in_process = in_process
    if not refs:
        return
    if not in_process:
        log.warning("INFERENCE_WARM_MODELS not loaded: %s", PREFORK_NOTE)
        with state.lock:
            state.results = [Warmed(ref, error=f"not loaded: {PREFORK_NOTE}") for ref in refs]
        return
    with state.lock:
        state.warming = True  # from now, so the first heartbeat does not report a finished warm-up
    threading.Thread(target=warm_up, args=(refs, inference.cache(), state), name="warm-models", daemon=True).start()


def report(state: State = _state) -> dict[str, Any] | None:
    """The worker's `serving` record (app/schemas/service.py WorkerServing); None (the record unchanged) if it
    cannot be read now, which is logged."""
    try:
        return _report(state)
    except Exception:
        log.exception("could not report what this worker serves")
        return None


def _report(state: State) -> dict[str, Any]:
    with state.lock:
        results, warming = list(state.results), state.warming
    failed = [{"ref": w.ref, "error": w.error} for w in results if w.error is not None]
    slots = get_settings().inference_cache_models
    if not state.in_process:
        return {"backend_auto": None, "backend_note": PREFORK_NOTE, "cache_slots": slots, "warming": False,
                "warm_models": [], "warm_failed": failed}  # fmt: skip
    auto = translation.auto_backend()
    refs = {w.model_id: w.ref for w in results if w.model_id is not None and w.error is None}
    translators = translation.ct2_models().held()
    models = []
    for held in inference.cache().held():
        translator, ct2_ms = translators.get(held.model_id, (None, 0.0))
        on_ct2 = translator is not None and auto.backend == translation.CTRANSLATE2
        models.append(
            {
                "model_id": held.model_id,
                "pinned": held.pinned,
                "ref": refs.get(held.model_id),
                "backend": translation.CTRANSLATE2 if on_ct2 else translation.PYTORCH,
                "loaded_at": held.loaded_at.isoformat(),
                "load_ms": round(held.load_ms + (ct2_ms if translator is not None else 0.0), 1),
            }
        )
    return {"backend_auto": auto.backend, "backend_note": auto.note, "cache_slots": slots, "warming": warming,
            "warm_models": models, "warm_failed": failed}  # fmt: skip
