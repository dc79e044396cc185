"""Abuse limits: requests per minute per API key (queued + running jobs per owner: app/services/job_quota.py).

The request counts live in Redis when the broker is Redis, so every API process shares them, and in
memory in embedded mode (one API process). The `limits` library keeps them in a moving window: at most
RATE_LIMIT_PER_MINUTE requests in any 60 seconds, or the key's own `rate_limit_per_minute` where an admin set one
(PATCH /v1/keys/{id}). The key's limit travels in its Caller, which each API process remembers for
AUTH_CACHE_SECONDS (app/api/ttl_cache.py): a changed limit applies at once in the process that changed it and within
that time in the others. Each limit counts on its own: requests made under another limit do not count against it.
A limiter whose storage cannot be reached lets requests through and logs it (at most every WARN_EVERY seconds): a
Redis outage must not refuse or fail requests.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from functools import lru_cache
from typing import Any

from fastapi import HTTPException, status
from limits import RateLimitItem, RateLimitItemPerMinute
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter
from starlette.concurrency import run_in_threadpool

from app.core.settings import Settings
from app.db.keys import Caller

log = logging.getLogger(__name__)

STORAGE_TIMEOUT = 0.5  # seconds a Redis call may take before the limiter gives up and lets the request in
SKIP_AFTER_FAILURE = 5.0  # seconds the limiter stays out of the way after its storage failed
WARN_EVERY = 30.0

KEY_RESPONSES = {
    401: {"description": "Missing, invalid, revoked or expired API key"},
    403: {"description": "The key lacks the scope the operation needs (its `x-required-scope`)"},
    429: {
        "description": "Over the key's own rate_limit_per_minute, else RATE_LIMIT_PER_MINUTE (or, for POST /v1/jobs, "
        "MAX_ACTIVE_JOBS_PER_KEY); see Retry-After",
        "headers": {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
    },
}


def too_many_requests(detail: str, retry_after: int) -> HTTPException:
    return HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, detail, headers={"Retry-After": str(retry_after)})


def storage_url(settings: Settings) -> str:
    return "memory://" if settings.embedded_broker else settings.celery_broker_url


class _SweepingMemoryStorage(MemoryStorage):
    """limits' in-memory storage, sweeping its expired entries every SWEEP_SECONDS. limits' own starts a timer thread
    10 ms after a hit whenever the last one has ended, so a request every 10 ms or more started a thread each: 0.55 ms
    of the embedded API's CPU a request on a 2-core machine (5% of it, profiled with py-spy under one-sentence
    translations). The sweep only frees memory: a hit counts each entry's own time against the window."""

    SWEEP_SECONDS = 5.0

    def _MemoryStorage__schedule_expiry(self) -> None:  # limits 5.8's private hook, pinned in pyproject.toml
        if not self.timer.is_alive():
            expire = self._MemoryStorage__expire_events  # type: ignore[attr-defined]
            self.timer = threading.Timer(self.SWEEP_SECONDS, expire)
            self.timer.daemon = True
            self.timer.start()


class _Limiter:
    """A moving-window limiter on one storage, and what it remembers of that storage failing: after a failure
    it stays out of the way for SKIP_AFTER_FAILURE seconds and logs at most every WARN_EVERY seconds."""

    def __init__(self, url: str) -> None:
        options: dict[str, Any] = {}
        self.in_memory = url.startswith("memory://")
        if not self.in_memory:
            options = {"socket_timeout": STORAGE_TIMEOUT, "socket_connect_timeout": STORAGE_TIMEOUT}
        storage = _SweepingMemoryStorage() if self.in_memory else storage_from_string(url, **options)
        self.strategy = MovingWindowRateLimiter(storage)
        self._lock = threading.Lock()
        self._skip_until = 0.0
        self._last_warning = -math.inf

    def retry_after(self, item: RateLimitItem, identifier: str) -> int | None:
        """Count one request; None if it is allowed (or the storage failed), else the seconds to wait."""
        if time.monotonic() < self._skip_until:
            return None
        try:
            if self.strategy.hit(item, "api-key", identifier):
                return None
            reset_at = self.strategy.get_window_stats(item, "api-key", identifier).reset_time
        except Exception as exc:  # any storage failure (refused, timed out, evicted script...) fails open
            self._failed(exc)
            return None
        return max(1, math.ceil(reset_at - time.time()))

    def _failed(self, exc: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            self._skip_until = now + SKIP_AFTER_FAILURE
            if now - self._last_warning < WARN_EVERY:
                return
            self._last_warning = now
        log.warning(
            "rate limiter storage unavailable (%s: %s); letting requests through unlimited",
            type(exc).__name__,
            str(exc)[:200],
        )


@lru_cache
def limiter_for(url: str) -> _Limiter:
    """One limiter per storage URL and process (its Redis connection pool is shared by all requests)."""
    return _Limiter(url)


def limit_for(key: Caller, settings: Settings) -> tuple[int, str]:
    """The requests per minute `key` may make (0: unlimited) and where that number comes from, as a 429 names it:
    the key's own limit if it has one, else the service's setting."""
    if key.rate_limit_per_minute is not None:
        return key.rate_limit_per_minute, f"the key's own rate_limit_per_minute={key.rate_limit_per_minute}"
    return settings.rate_limit_per_minute, f"RATE_LIMIT_PER_MINUTE={settings.rate_limit_per_minute}"


async def count_request(key: Caller, settings: Settings) -> None:
    """Every authenticated request counts (app/api/scopes.py authorize): 429 + Retry-After over the key's limit
    (`limit_for`)."""
    per_minute, source = limit_for(key, settings)
    if per_minute <= 0:
        return
    limiter, item = limiter_for(storage_url(settings)), RateLimitItemPerMinute(per_minute)
    if limiter.in_memory:  # counted in this process: nothing to wait for
        retry_after = limiter.retry_after(item, key.id)
    else:  # a Redis round trip: off the event loop
        retry_after = await run_in_threadpool(limiter.retry_after, item, key.id)
    if retry_after is not None:
        raise too_many_requests(
            f"API key {key.prefix}... made more than {per_minute} requests in the last minute ({source}); "
            f"retry in {retry_after} s",
            retry_after,
        )


# include_router(router, **KEYED): the answers of a route that needs a key (each declares its scope, app/api/scopes.py).
KEYED: dict[str, Any] = {"responses": KEY_RESPONSES}
