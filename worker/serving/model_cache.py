"""A per-process LRU cache of loaded models: each is read once, checked against its recorded sha256.

The files come from the artifact store: with a remote one (S3) they are downloaded into this host's cache first,
and files already there are reused when they match the store's.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch

from app.artifacts import ArtifactNotFound, ArtifactStoreError, get_store
from app.core.settings import Settings, get_settings
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


class ModelCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._models: OrderedDict[str, LoadedModel] = OrderedDict()
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
            loaded = _load(model_id)
            with self._lock:
                self._models[model_id] = loaded
                while len(self._models) > self.capacity:
                    evicted, _ = self._models.popitem(last=False)
                    log.info("evicted model %s from the cache", evicted)
                self._loading.pop(model_id, None)
            return loaded

    def forget(self, model_id: str) -> None:
        with self._lock:
            self._models.pop(model_id, None)

    def __contains__(self, model_id: str) -> bool:
        return model_id in self._models
