"""The CTranslate2 translators an inference worker process holds, by model and weights, least recently used out.

The request threads, the micro-batcher's thread and the background tasks (evaluations, file translations) share
them; one lock keeps two threads from converting or loading the same model at once. A model that could not be
converted or loaded is remembered for RETRY_SECONDS, so that requests leaving the backend to the service go
straight to PyTorch instead of converting it again each time; one that asks for CTranslate2 by name always tries.
Pinned models (INFERENCE_WARM_MODELS) are never evicted in favour of others, as in the PyTorch models' cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from worker.serving.ct2 import CT2Translator
from worker.serving.errors import backend_failed
from worker.serving.model_cache import LoadedModel

log = logging.getLogger(__name__)
RETRY_SECONDS = 600.0  # a conversion that failed (a full disk, say) is tried again after this long


class Ct2Models:
    def __init__(
        self,
        capacity: int,
        build: Callable[[LoadedModel], CT2Translator] = CT2Translator,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.build, self.clock = capacity, build, clock
        self._loaded: OrderedDict[str, CT2Translator] = OrderedDict()
        self._failed: dict[str, tuple[float, str]] = {}  # key -> (when, why)
        self._load_ms: dict[str, float] = {}  # key -> milliseconds its conversion and loading took
        self._pinned: set[str] = set()  # model ids
        self._lock = threading.Lock()

    @staticmethod
    def key(loaded: LoadedModel) -> str:
        return f"{loaded.model_id}:{loaded.meta['sha256']}"

    def get(self, loaded: LoadedModel, required: bool) -> CT2Translator | None:
        """The model's translator, loaded now if it is not yet. If it cannot be: required (the request named
        CTranslate2) raises a 503 naming the backend; otherwise None, logged once per RETRY_SECONDS."""
        key = self.key(loaded)
        with self._lock:
            if key in self._loaded:
                self._loaded.move_to_end(key)
                return self._loaded[key]
            failed = self._failed.get(key)
            if not required and failed is not None and self.clock() - failed[0] < RETRY_SECONDS:
                return None
            started = self.clock()
            try:
                translator = self.build(loaded)
            except Exception as exc:  # conversion or loading: whatever CTranslate2 raises, ValueError included
                self._failed[key] = (self.clock(), f"{type(exc).__name__}: {exc}")
                if required:
                    raise backend_failed("ctranslate2", loaded.model_id, exc) from exc
                log.warning(
                    "model %s: CTranslate2 cannot serve it (%s: %s); PyTorch serves it, CTranslate2 is tried again "
                    "in %.0f s",
                    loaded.model_id, type(exc).__name__, exc, RETRY_SECONDS, exc_info=exc,
                )  # fmt: skip
                return None
            self._failed.pop(key, None)
            self._loaded[key] = translator
            self._load_ms[key] = (self.clock() - started) * 1000
            for old in [k for k in self._loaded if k.split(":")[0] not in self._pinned]:
                if len(self._loaded) <= self.capacity:
                    break
                del self._loaded[old]
                self._load_ms.pop(old, None)
            return translator

    def pin(self, model_id: str) -> None:
        """Keep the model's translators, whatever else is loaded after them."""
        with self._lock:
            self._pinned.add(model_id)

    def held(self) -> dict[str, tuple[CT2Translator, float]]:
        """By model id: its most recently used translator and how long that one took to convert and load (ms)."""
        with self._lock:
            return {key.split(":")[0]: (t, self._load_ms.get(key, 0.0)) for key, t in self._loaded.items()}

    def clear(self) -> None:
        with self._lock:
            self._loaded.clear()
            self._failed.clear()
            self._load_ms.clear()
