"""Checkpoints: what a checkpoint directory holds and how a model, its tokenizer and its training state go in and
come out. The directory itself (atomic writes, manifest, hashes) is model/io/checkpoint_files.py; tensors as
safetensors, model/io/checkpoint_tensors.py; averaging, model/io/averaging.py.

load_checkpoint recomputes every hash; latest_good_checkpoint skips a corrupted or torn checkpoint and falls back
to the one before.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor

from model.data.tokenizer import Tokenizer
from model.io.checkpoint_files import (
    CONFIG_FILE,
    FORMAT_VERSION,
    MODEL_FILE,
    OPTIMIZER_FILE,
    TOKENIZER_FILE,
    TRAINER_STATE_FILE,
    CheckpointError,
    json_bytes,
    list_checkpoints,
    parse_json,
    read_checkpoint_files,
    remove_stale_temp_dirs,
    write_checkpoint_files,
)
from model.io.checkpoint_tensors import decode_model, decode_optimizer, encode_model, encode_optimizer
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

logger = logging.getLogger(__name__)
OBJECTIVES = ("translation", "denoising")


@dataclass
class Checkpoint:
    """Everything load_checkpoint read; optimizer_state and trainer_state are None for weights-only checkpoints."""

    path: Path
    sha256: str  # checkpoint_sha256: the digest of manifest.json
    meta: dict[str, Any]  # config.json
    model_config: ModelConfig
    tokenizer: Tokenizer
    model_state: dict[str, Tensor]  # full state dict, tied names included (they share one tensor)
    optimizer_state: dict[str, Any] | None  # torch Optimizer.state_dict() form
    trainer_state: dict[str, Any] | None

    @property
    def objective(self) -> str:
        return cast(str, self.meta["objective"])

    @property
    def step(self) -> int:
        return int(self.meta.get("step", 0))


def save_checkpoint(
    directory: str | Path,
    model: Transformer,
    tokenizer: Tokenizer,
    objective: str,
    *,
    step: int = 0,
    metrics: dict[str, float] | None = None,
    kind: str = "step",
    optimizer: torch.optim.Optimizer | None = None,
    trainer_state: dict[str, Any] | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint directory atomically and return its path.

    A resumable checkpoint passes optimizer and trainer_state (JSON-serialisable); an inference-only one
    (e.g. kind="averaged") passes neither. extra_meta is merged into config.json (e.g. the training config).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is not one of {OBJECTIVES}")
    if model.config.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"model vocab_size={model.config.vocab_size} != tokenizer vocab_size={tokenizer.vocab_size}")
    meta = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "objective": objective,
        "step": step,
        "metrics": metrics or {},
        "model": model.config.to_dict(),
        "tokenizer_fingerprint": tokenizer.fingerprint,
        **(extra_meta or {}),
    }
    files = {
        MODEL_FILE: encode_model(model),
        CONFIG_FILE: json_bytes(meta),
        TOKENIZER_FILE: tokenizer.to_json_str().encode("utf-8"),
    }
    if optimizer is not None:
        files[OPTIMIZER_FILE] = encode_optimizer(model, optimizer)
    if trainer_state is not None:
        files[TRAINER_STATE_FILE] = json_bytes(trainer_state)
    return write_checkpoint_files(directory, files)


def load_checkpoint(directory: str | Path, verify: bool = True, with_optimizer: bool = True) -> Checkpoint:
    """Read a checkpoint (tensors on CPU). verify=True refuses any file whose sha256 differs from the manifest."""
    path = Path(directory)
    files, sha = read_checkpoint_files(path, verify)
    for name in (MODEL_FILE, CONFIG_FILE, TOKENIZER_FILE):
        if name not in files:
            raise CheckpointError(f"{path / name} is missing")
    meta = parse_json(files[CONFIG_FILE], path / CONFIG_FILE)
    try:
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format_version={meta.get('format_version')!r}, expected {FORMAT_VERSION}")
        if meta.get("objective") not in OBJECTIVES:
            raise ValueError(f"objective={meta.get('objective')!r} is not one of {OBJECTIVES}")
        config = ModelConfig.from_dict(meta["model"])
        tokenizer = Tokenizer.from_json_str(files[TOKENIZER_FILE].decode("utf-8"))
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: {e}") from e
    if tokenizer.fingerprint != meta.get("tokenizer_fingerprint"):
        raise CheckpointError(
            f"{path / TOKENIZER_FILE} has fingerprint {tokenizer.fingerprint}, but "
            f"{CONFIG_FILE} expects {meta.get('tokenizer_fingerprint')}"
        )
    optimizer_state = None
    if with_optimizer and OPTIMIZER_FILE in files:
        optimizer_state = decode_optimizer(files[OPTIMIZER_FILE], path / OPTIMIZER_FILE)
    trainer_state = (
        parse_json(files[TRAINER_STATE_FILE], path / TRAINER_STATE_FILE) if TRAINER_STATE_FILE in files else None
    )
    return Checkpoint(
        path,
        sha,
        meta,
        config,
        tokenizer,
        decode_model(files[MODEL_FILE], path / MODEL_FILE),
        optimizer_state,
        trainer_state,
    )


def latest_good_checkpoint(root: str | Path) -> Path | None:
    """The newest step checkpoint under root that passes verification and is resumable; None if there is none.

    A corrupted or torn newest checkpoint is skipped (not deleted), so training resumes from the one before.
    """
    for path in reversed(list_checkpoints(root)):
        try:
            files, _ = read_checkpoint_files(path, verify=True)
        except CheckpointError as e:
            logger.warning("skipping checkpoint %s: %s", path.name, e)
            continue
        if TRAINER_STATE_FILE in files and OPTIMIZER_FILE in files:
            return path
    return None


def resume_point(root: str | Path) -> Path | None:
    """Where a run under root resumes: leftovers of a crashed writer removed, the newest good checkpoint returned
    and any newer (corrupted or torn) ones deleted, since the resumed run will write them again."""
    remove_stale_temp_dirs(root)
    good = latest_good_checkpoint(root)
    if good is not None:
        for path in list_checkpoints(root):
            if path.name > good.name:
                logger.warning("deleting %s: newer than the last good checkpoint %s", path.name, good.name)
                shutil.rmtree(path, ignore_errors=True)
    return good


def model_from_checkpoint(ckpt: Checkpoint, device: str | torch.device = "cpu") -> Transformer:
    model = Transformer(ckpt.model_config)
    try:
        model.load_state_dict(ckpt.model_state, strict=True)
    except RuntimeError as e:
        raise CheckpointError(f"{ckpt.path / MODEL_FILE} does not fit its config: {e}") from e
    return model.to(device)


def load_model(
    directory: str | Path, device: str | torch.device = "cpu", verify: bool = True
) -> tuple[Transformer, Tokenizer, dict[str, Any]]:
    """(model in eval mode on device, tokenizer, meta) for inference; meta is config.json plus path and sha256."""
    ckpt = load_checkpoint(directory, verify=verify, with_optimizer=False)
    model = model_from_checkpoint(ckpt, device).eval()
    return model, ckpt.tokenizer, {**ckpt.meta, "path": str(ckpt.path), "sha256": ckpt.sha256}
