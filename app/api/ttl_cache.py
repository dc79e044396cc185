"""What the last few seconds of requests already read from the database: who a key belongs to (its member's role and
its scopes), whose a model is.

Every authenticated request would otherwise query the key, and every inference request the model as well,
before it does any work: on a translate request that is half the API's own CPU. Both facts change rarely
(a key is revoked, a model deleted), so each API process keeps what it read for AUTH_CACHE_SECONDS (0: off):

- a revoked key, a member's lowered role, or a deleted model, takes effect at once in the API process that made the
  change (its route forgets the entries) and within AUTH_CACHE_SECONDS in the others (docs/security.md); a key's
  expiry is checked on every request, remembered or not;
- only successes are kept: an unknown key or model is looked up every time, so a new key works at once;
- keys are kept by their SHA-256, never in clear;
- models are kept by id only: a `name@alias` reference is resolved on every request (app/services/model_refs.py) and
  only the model it names is kept, so an alias that moves is followed by the very next request.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

from cachetools import TTLCache

from app.core.settings import get_settings
from app.db.keys import Caller

V = TypeVar("V")
MAX_ENTRIES = 10_000  # per cache and process: keys or models in use at once, with room to spare


@dataclass(frozen=True)
class ModelFacts:
    """What an inference route needs of a model before it sends the work to a worker."""

    id: str
    owner_id: str
    objective: str
    low_confidence_below: float | None = None  # the calibrated threshold of its low-confidence flag, if it has one
    languages: tuple[str | None, str | None] = (None, None)  # source and target, as its owner says
    pairs: tuple[tuple[str, str], ...] = ()  # (source, target) of each pair a model of several was trained on
    beam_size: int | None = None  # its owner's default beam; None: DEFAULT_BEAM_SIZE


class Recent(Generic[V]):
    """A thread-safe map whose entries expire `ttl` seconds after they were stored (cachetools' TTLCache)."""

    def __init__(self, ttl: float, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: TTLCache[Hashable, V] | None = TTLCache(max_entries, ttl) if ttl > 0 else None
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        if self._entries is None:
            return None
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Hashable, value: V) -> None:
        if self._entries is not None:
            with self._lock:
                self._entries[key] = value

    def forget(self, key: Hashable) -> None:
        if self._entries is not None:
            with self._lock:
                self._entries.pop(key, None)


@lru_cache
def _callers(ttl: float) -> Recent[Caller]:
    return Recent(ttl)


@lru_cache
def _models(ttl: float) -> Recent[ModelFacts]:
    return Recent(ttl)


def callers() -> Recent[Caller]:
    """Callers by the SHA-256 of their key."""
    return _callers(get_settings().auth_cache_seconds)


def models() -> Recent[ModelFacts]:
    """Models by id."""
    return _models(get_settings().auth_cache_seconds)


def clear() -> None:
    """Forget everything (tests, and settings that changed)."""
    _callers.cache_clear()
    _models.cache_clear()
