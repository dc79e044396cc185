"""The translation memories an inference worker has built, by dataset (model/data/translation_memory.py).

A memory is a parallel dataset's pairs, read into a TextRows file (worker/training/job_data.py, as a job reads its
corpus) and indexed once per process: 1M segments took 6 s and 62 MB of index besides the vocabulary on two CPU
cores, and a lookup there 6.2 ms at the median (bench/memory_lookup.py). A dataset's rows never change, so a built
memory stays valid until the cache drops it (least recently used, INFERENCE_CACHE_MODELS of them); the API has
checked, before sending the request, that the dataset exists, is the caller's, and is parallel and parsed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict

from app.core.settings import get_settings
from app.db.session import session_scope
from app.db.tables import Dataset
from model.data.translation_memory import TranslationMemory
from model.train.config import TrainingError
from worker.serving.errors import RequestError
from worker.training.job_data import read_rows

log = logging.getLogger(__name__)


class Memories:
    """Built memories by dataset id, at most `size`; one build at a time per dataset (concurrent requests for a
    memory being built wait for it)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._built: OrderedDict[str, TranslationMemory] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}

    def get(self, dataset_id: str) -> TranslationMemory:
        with self._lock:
            if dataset_id in self._built:
                self._built.move_to_end(dataset_id)
                return self._built[dataset_id]
            building = self._building.setdefault(dataset_id, threading.Lock())
        with building:
            with self._lock:
                if dataset_id in self._built:  # built by the request this one waited for
                    return self._built[dataset_id]
            memory = self._build(dataset_id)
            with self._lock:
                self._built[dataset_id] = memory
                while len(self._built) > self.size:
                    gone, _ = self._built.popitem(last=False)
                    log.info("translation memory %s dropped from the cache", gone)
                self._building.pop(dataset_id, None)
        return memory

    @staticmethod
    def _build(dataset_id: str) -> TranslationMemory:
        started = time.perf_counter()
        with session_scope() as session:
            dataset = session.get(Dataset, dataset_id)
            if dataset is None:
                raise RequestError(404, f"dataset {dataset_id} not found: it was deleted")
            if dataset.kind != "parallel":
                raise RequestError(422, f"dataset {dataset_id} is {dataset.kind}: a memory needs a parallel dataset")
            try:
                pairs = read_rows(dataset)
            except TrainingError as exc:  # no pair with both sides
                raise RequestError(422, str(exc)) from exc
        memory = TranslationMemory(pairs)
        log.info(
            "translation memory %s: %d segments indexed in %.1f s (%.1f MB of index)",
            dataset_id, len(memory), time.perf_counter() - started, memory.nbytes / 1e6,
        )  # fmt: skip
        return memory


_memories: Memories | None = None
_memories_lock = threading.Lock()


def memories() -> Memories:
    global _memories
    with _memories_lock:
        if _memories is None:
            _memories = Memories(get_settings().inference_cache_models)
        return _memories
