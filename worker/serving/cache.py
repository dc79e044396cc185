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
from app.db.models import Job, TrainedModel
from app.db.session import session_scope
from model.checkpoint import load_model
from model.checkpoint_files import CheckpointError
from model.tokenizer import Tokenizer
from model.transformer import Transformer
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


def pick_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _load(model_id: str) -> LoadedModel:
    with session_scope() as session:
        row = session.get(TrainedModel, model_id)
        if row is None:
            raise ModelUnavailable(404, f"model {model_id} not found")
        job = session.get(Job, row.job_id)
        noise = (job.training_config or {}).get("noise", "span") if job else "span"
        storage_key, sha256, objective = row.storage_key, row.sha256, row.objective
    try:
        model, tokenizer, meta = load_model(get_store().fetch(storage_key), pick_device())
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
    log.info("loaded model %s (%s) on %s", model_id, objective, pick_device())
    return LoadedModel(model_id, objective, model, tokenizer, noise, meta)


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
