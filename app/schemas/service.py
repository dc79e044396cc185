"""Schemas of the service routes: health, workers, ping."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from app.schemas.common import Input, Output


class ComponentHealth(Output):
    ok: bool
    detail: str


class WarmModel(Output):
    """A model loaded in an inference worker's process: its next request starts decoding at once."""

    model_id: str
    pinned: bool = False  # loaded at the worker's start (INFERENCE_WARM_MODELS) and never evicted for another
    ref: str | None = None  # the INFERENCE_WARM_MODELS reference that pinned it (an id, name@alias, name@version)
    backend: Literal["ctranslate2", "pytorch"]  # what a translation leaving the backend to the service uses now
    loaded_at: datetime
    load_ms: float  # loading it (PyTorch, plus CTranslate2's conversion and loading where that backend holds it)


class WarmFailure(Output):
    ref: str  # an INFERENCE_WARM_MODELS reference that the worker could not load
    error: str  # why: it names no model, its files are missing, no cache slot is left, ...


class WorkerServing(Output):
    """What an inference worker serves, from its process's caches at its last heartbeat (thread-pool workers)."""

    backend_auto: Literal["ctranslate2", "pytorch"] | None = None  # what `backend: auto` means on this worker
    backend_note: str | None = None  # why that is not CTranslate2 on the worker's own device, where it is not
    cache_slots: int | None = None  # INFERENCE_CACHE_MODELS
    warming: bool = False  # still loading INFERENCE_WARM_MODELS
    warm_models: list[WarmModel] = []  # of the caller's organisation
    other_models: int = 0  # warm models of other organisations, counted only
    warm_failed: list[WarmFailure] = []  # shown to keys with the admin scope


class WorkerPublic(Output):
    hostname: str
    queues: list[str]
    last_seen_at: datetime
    draining: bool = False  # shutting down: takes no new work; its training jobs checkpoint and move elsewhere
    device_kind: Literal["cpu", "cuda"] | None = None  # None: a worker that has not reported its device yet
    device_name: str | None = None  # e.g. "NVIDIA H100 80GB HBM3", or the CPU's model and cores
    device_memory_total: int | None = None  # bytes
    device_memory_free: int | None = None  # bytes, at its last heartbeat
    serving: WorkerServing | None = None  # inference workers, in GET /v1/workers (not in /healthz)


class WorkerList(Output):
    workers: list[WorkerPublic]


class Health(Output):
    status: Literal["ok", "degraded", "unavailable"]
    database: ComponentHealth
    broker: ComponentHealth
    workers: list[WorkerPublic]


class PingCreate(Input):
    queue: Literal["training", "inference"] = "inference"


class PingPublic(Output):
    id: str
    queue: str
    created_at: datetime
    answered_at: datetime | None
    worker: str | None
    round_trip_ms: float | None
