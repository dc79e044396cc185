"""Schemas of the service routes: health, workers, ping."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from app.schemas.common import Input, Output


class ComponentHealth(Output):
    ok: bool
    detail: str


class WorkerPublic(Output):
    hostname: str
    queues: list[str]
    last_seen_at: datetime
    draining: bool = False  # shutting down: takes no new work; its training jobs checkpoint and move elsewhere
    device_kind: Literal["cpu", "cuda"] | None = None  # None: a worker that has not reported its device yet
    device_name: str | None = None  # e.g. "NVIDIA H100 80GB HBM3", or the CPU's model and cores
    device_memory_total: int | None = None  # bytes
    device_memory_free: int | None = None  # bytes, at its last heartbeat


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
