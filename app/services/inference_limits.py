"""The limits a decoding request is held to: the beam (MAX_BEAM_SIZE, the model's default beam when the request names
none) and the texts a request may carry.

MAX_TEXTS_PER_REQUEST, or its default from the inference workers' devices: 64 texts while every inference worker
computes on a CPU (a request of 64 short sentences takes a CPU worker about a second), 512 once one computes on a GPU
(where hundreds of sentences decode in one batch: worker/serving/decode_limits.py). The API learns the devices from
the workers' heartbeats (the `workers` table), read at most every WORKERS_TTL seconds per API process."""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.core.task_names import INFERENCE_QUEUE
from app.db.worker_rows import live_workers
from app.schemas.inference import beam_for
from app.services.errors import InvalidField

CPU_MAX_TEXTS = 64
GPU_MAX_TEXTS = 512
WORKERS_TTL = 10.0
_read: tuple[float, bool] | None = None  # (when, a live inference worker computes on a GPU)
_lock = threading.Lock()


def beam_size(settings: Settings, requested: int | None, model_default: int | None) -> int:
    """The beam a request decodes with (beam_for); InvalidField (422) over MAX_BEAM_SIZE."""
    beam = beam_for(requested, model_default)
    if beam > settings.max_beam_size:
        whose = "" if requested is not None else ", the model's beam_size,"
        raise InvalidField("beam_size", f"beam_size={beam}{whose} exceeds MAX_BEAM_SIZE={settings.max_beam_size}")
    return beam


def check_default_beam(
    settings: Settings, model_id: str, objective: str, config: dict[str, Any], beam_size: int
) -> None:
    """InvalidField (422) unless a request could ask a model for this beam as its default: a translation model, at
    most MAX_BEAM_SIZE and half its vocabulary (what its worker allows: worker/tasks/inference.py)."""
    if objective != "translation":
        raise InvalidField("beam_size", f"model {model_id} was trained for {objective}; a beam is translation's")
    vocab_size = config.get("vocab_size")
    widest = min(settings.max_beam_size, int(vocab_size or 0) // 2)
    if beam_size > widest:
        raise InvalidField(
            "beam_size",
            f"beam_size={beam_size} exceeds {widest}, the widest beam this model serves "
            f"(MAX_BEAM_SIZE={settings.max_beam_size}, half its vocabulary of {vocab_size})",
        )


def gpu_serving(session: Session, settings: Settings) -> bool:
    """Whether a live inference worker computes on a GPU, as read in the last WORKERS_TTL seconds."""
    global _read
    with _lock:
        if _read is not None and time.monotonic() - _read[0] < WORKERS_TTL:
            return _read[1]
    found = any(
        w.device_kind == "cuda" and INFERENCE_QUEUE in w.queues.split(",")
        for w in live_workers(session, settings.worker_heartbeat_seconds)
    )
    with _lock:
        _read = (time.monotonic(), found)
    return found


def forget() -> None:
    """Read the workers again at the next request (tests)."""
    global _read
    with _lock:
        _read = None


def max_texts_per_request(session: Session, settings: Settings) -> tuple[int, str]:
    """The limit, and where it comes from (for the 422 that names it)."""
    if settings.max_texts_per_request is not None:
        return settings.max_texts_per_request, "MAX_TEXTS_PER_REQUEST"
    if gpu_serving(session, settings):
        return GPU_MAX_TEXTS, "MAX_TEXTS_PER_REQUEST's default with a GPU inference worker"
    return CPU_MAX_TEXTS, "MAX_TEXTS_PER_REQUEST's default with CPU inference workers"
