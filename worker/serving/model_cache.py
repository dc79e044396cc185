"""A per-process LRU cache of loaded models: each is read once, checked against its recorded sha256.

The files come from the artifact store: with a remote one (S3) they are downloaded into this host's cache first,
and files already there are reused when they match the store's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import torch

from app.artifacts import ArtifactNotFound, ArtifactStoreError, get_store
from app.core.settings import Settings, get_settings
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import Job, TrainedModel
from app.schemas.jobs import TrainingSpec
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import load_model
from model.io.checkpoint_files import CheckpointError
from model.nn.compile import compile_layers
from model.nn.transformer import Transformer
from worker.device import worker_device
from worker.serving.errors import ModelUnavailable

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    model_id: str
    objective: str
    model: Transformer
    tokenizer: Tokenizer
    noise: str  # how a denoising model was trained: "span" or "token"
    meta: dict[str, Any]


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def serving_dtype(setting: str, device: torch.device) -> torch.dtype:
    """SERVING_DTYPE on `device`: auto is bf16 on a GPU (half the memory, tensor cores; the beam search keeps
    its scores in fp32) and fp32 on a CPU, where bf16 matmuls are slower on most CPUs."""
    if setting == "auto":
        setting = "bf16" if device.type == "cuda" else "fp32"
    return DTYPES[setting]


def prepare_for_serving(model: Transformer, device: torch.device, settings: Settings) -> Transformer:
    """The loaded model in SERVING_DTYPE, its layers compiled if SERVING_COMPILE is set."""
    model = model.to(serving_dtype(settings.serving_dtype, device))
    if settings.serving_compile:
        compile_layers(model)
    return model


def _load(model_id: str) -> LoadedModel:
    with session_scope() as session:
        row = session.get(TrainedModel, model_id)
        if row is None:
            raise ModelUnavailable(404, f"model {model_id} not found")
        job = session.get(Job, row.job_id) if row.job_id else None  # an imported model has no job
        noise = TrainingSpec.stored(job.training_config).noise if job else None
        storage_key, sha256, objective = row.storage_key, row.sha256, row.objective
    try:
        device = worker_device()
        model, tokenizer, meta = load_model(get_store().fetch(storage_key), device)
        model = prepare_for_serving(model, device, get_settings())
    except ArtifactNotFound as exc:
        log.error("model %s: %s", model_id, exc)
        raise ModelUnavailable(
            503, f"model {model_id}: its files are missing from the artifact store; retrain it or restore them"
        ) from exc
    except ArtifactStoreError as exc:
        log.error("model %s: %s", model_id, exc)
        raise ModelUnavailable(503, f"model {model_id}: the artifact store is unavailable; try again") from exc
    except CheckpointError as exc:
        log.error("model %s: %s", model_id, exc)
        raise ModelUnavailable(
            503,
            f"model {model_id}: its files fail verification (not a valid safetensors checkpoint, or a hash mismatch); "
            "retrain or restore them",
        ) from exc
    if meta["sha256"] != sha256:
        raise ModelUnavailable(
            503,
            f"model {model_id}: files do not match the recorded sha256 "
            f"({meta['sha256'][:12]}… != {sha256[:12]}…); retrain or restore them",
        )
    log.info("loaded model %s (%s) on %s in %s", model_id, objective, device, next(model.parameters()).dtype)
    return LoadedModel(model_id, objective, model, tokenizer, noise or meta.get("noise", "span"), meta)


@dataclass(frozen=True)
class Held:
    """A model in the cache as the heartbeat reports it."""

    model_id: str
    pinned: bool  # INFERENCE_WARM_MODELS: never evicted in favour of another
    loaded_at: datetime
    load_ms: float


class ModelCache:
    """The least recently used model out beyond `capacity`, except pinned ones (INFERENCE_WARM_MODELS, loaded at
    the worker's start): another model takes the least recently used unpinned slot, and where the pinned models
    fill every slot it is loaded for its request and not kept."""

    def __init__(self, capacity: int, load: Callable[[str], LoadedModel] = _load) -> None:
        self.capacity, self.load = capacity, load
        self._models: OrderedDict[str, LoadedModel] = OrderedDict()
        self._held: dict[str, tuple[datetime, float]] = {}  # model id -> (loaded at, milliseconds it took)
        self._pinned: set[str] = set()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, model_id: str) -> LoadedModel:
        with self._lock:
            if model_id in self._models:
                self._models.move_to_end(model_id)
                return self._models[model_id]
            loading = self._loading.setdefault(model_id, threading.Lock())
        with loading:  # one load per model, even when many requests for it arrive together
            with self._lock:
                if model_id in self._models:
                    return self._models[model_id]
            started = time.perf_counter()
            loaded = self.load(model_id)
            with self._lock:
                self._models[model_id] = loaded
                self._held[model_id] = (utcnow(), (time.perf_counter() - started) * 1000)
                self._evict()
                self._loading.pop(model_id, None)
            return loaded

    def _evict(self) -> None:
        """Under the lock: the least recently used unpinned models out until the cache fits its capacity."""
        for model_id in [m for m in self._models if m not in self._pinned]:
            if len(self._models) <= self.capacity:
                return
            del self._models[model_id]
            self._held.pop(model_id, None)
            log.info("evicted model %s from the cache", model_id)

    def pin(self, model_id: str) -> None:
        """Keep `model_id` once loaded, whatever else is loaded after it."""
        with self._lock:
            self._pinned.add(model_id)

    def unpin(self, model_id: str) -> None:
        with self._lock:
            self._pinned.discard(model_id)

    def held(self) -> list[Held]:
        """The models loaded now, least recently used first."""
        with self._lock:
            return [Held(m, m in self._pinned, *self._held[m]) for m in self._models]

    def forget(self, model_id: str) -> None:
        with self._lock:
            self._models.pop(model_id, None)
            self._held.pop(model_id, None)

    def __contains__(self, model_id: str) -> bool:
        return model_id in self._models
