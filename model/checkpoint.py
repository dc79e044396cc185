"""Checkpoints: one directory per checkpoint, written atomically, safetensors and JSON only (no pickle anywhere).

    step-00001000/
        model.safetensors      weights; tied tensors stored once, their other names in the metadata
        optimizer.safetensors  optimizer tensors (Adam exp_avg, exp_avg_sq, step); groups as JSON metadata
        config.json            ModelConfig, objective, tokenizer fingerprint, step, metrics, kind
        tokenizer.json         the tokenizer the model was trained with
        trainer_state.json     step, best metric, schedule, batcher position, RNG states, elapsed time
        manifest.json          sha256 and size of every other file; written last

A directory is built under a temporary name in the same parent, every file and the directory fsynced, then
renamed into place, so a crash leaves either no checkpoint or a whole one. load_checkpoint recomputes every
hash; latest_good_checkpoint skips a corrupted or torn checkpoint and falls back to the one before.
Averaged checkpoints (Sec. 6.1: "averaging the last 5 checkpoints") hold weights only and are not resumable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor, nn

from model.config import ModelConfig
from model.tokenizer import Tokenizer
from model.transformer import Transformer

logger = logging.getLogger(__name__)
FORMAT_VERSION = 1
OBJECTIVES = ("translation", "denoising")
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
TRAINER_STATE_FILE = "trainer_state.json"
MANIFEST_FILE = "manifest.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, corrupted, or does not fit the model it is loaded into."""


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
        return self.meta["objective"]

    @property
    def step(self) -> int:
        return int(self.meta.get("step", 0))


# -- names ----------------------------------------------------------------------------------------------------

def step_dir(root: str | Path, step: int) -> Path:
    """ROOT/step-00001000: zero-padded so that names sort like steps."""
    return Path(root) / f"step-{step:08d}"


def list_checkpoints(root: str | Path) -> list[Path]:
    """Step checkpoint directories under root, oldest step first (temporary and averaged ones excluded)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


# -- tensors --------------------------------------------------------------------------------------------------

def _dedup(state: dict[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, str]]:
    """(tensors to store, {alias: stored name}); safetensors refuses tensors that share memory.

    Names that view exactly the same memory (tied embeddings) become aliases of the first name; a tensor that
    overlaps another one in any other way is copied, so it is stored on its own.
    """
    tensors: dict[str, Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    storages: set[int] = set()
    for name, t in state.items():
        t = t.detach()
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, t.device)
        if key in seen:
            aliases[name] = seen[key]
            continue
        ptr = t.untyped_storage().data_ptr()
        shared = ptr in storages and t.numel() > 0
        storages.add(ptr)
        seen[key] = name
        tensors[name] = (t.clone() if shared else t).to("cpu").contiguous()
    return tensors, aliases


def _encode_model(model: nn.Module) -> bytes:
    tensors, aliases = _dedup(model.state_dict())
    return st_save(tensors, metadata={"format": "pt", "aliases": json.dumps(aliases, sort_keys=True)})


def _decode_model(data: bytes, where: Path) -> dict[str, Tensor]:
    tensors, metadata = _safetensors(data, where)
    aliases = json.loads(metadata.get("aliases", "{}"))
    for alias, name in aliases.items():
        tensors[alias] = tensors[name]
    return tensors


def _param_names(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """Name of every parameter in the optimizer's order (its state_dict indexes them 0, 1, ...)."""
    names = {id(p): n for n, p in model.named_parameters()}  # named_parameters lists a tied weight once
    out = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if id(p) not in names:
                raise ValueError("the optimizer holds a parameter that is not in the model")
            out.append(names[id(p)])
    return out


def _encode_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer) -> bytes:
    """Optimizer tensors as "state.{index}.{key}"; numbers, groups and parameter names as JSON metadata."""
    sd = optimizer.state_dict()
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, per_param in sd["state"].items():
        for key, value in per_param.items():
            if isinstance(value, Tensor):
                tensors[f"state.{index}.{key}"] = value.detach().to("cpu").contiguous()
            else:
                scalars.setdefault(str(index), {})[key] = value
    metadata = {
        "param_groups": json.dumps(sd["param_groups"]),
        "scalars": json.dumps(scalars),
        "param_names": json.dumps(_param_names(model, optimizer)),
        "optimizer": type(optimizer).__name__,
    }
    return st_save(tensors, metadata=metadata)


def _decode_optimizer(data: bytes, where: Path) -> dict[str, Any]:
    tensors, metadata = _safetensors(data, where)
    try:
        state: dict[int, dict[str, Any]] = {}
        for key, value in tensors.items():
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
        for index, values in json.loads(metadata["scalars"]).items():
            state.setdefault(int(index), {}).update(values)
        groups = json.loads(metadata["param_groups"])
        for group in groups:
            if "betas" in group:
                group["betas"] = tuple(group["betas"])
        return {"state": state, "param_groups": groups, "param_names": json.loads(metadata["param_names"]),
                "optimizer": metadata.get("optimizer")}
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{where}: malformed optimizer metadata ({e})") from e


def load_optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module, state: dict[str, Any]) -> None:
    """Load what load_checkpoint returned as optimizer_state, after checking it indexes the same parameters."""
    expected = _param_names(model, optimizer)
    if state["param_names"] != expected:
        raise CheckpointError(f"optimizer state is for parameters {state['param_names'][:3]}... "
                              f"but this model's optimizer holds {expected[:3]}...")
    if state.get("optimizer") not in (None, type(optimizer).__name__):
        raise CheckpointError(f"optimizer state is for {state['optimizer']}, not {type(optimizer).__name__}")
    optimizer.load_state_dict({"state": state["state"], "param_groups": state["param_groups"]})


def _safetensors(data: bytes, where: Path) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Parse safetensors bytes; anything else (a pickle, say) is refused, never executed."""
    try:
        tensors = st_load(data)
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
    except (SafetensorError, ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{where} is not a valid safetensors file: {e}") from e
    return tensors, header.get("__metadata__", {}) or {}


# -- RNG ------------------------------------------------------------------------------------------------------

def capture_rng_state() -> dict[str, Any]:
    """Python, torch CPU and (if present) CUDA generator states as JSON-friendly lists of ints."""
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {"python": [version, list(internal), gauss], "torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        # Saved on a host with any number of GPUs, resumed on one with any other: devices both hosts have get
        # their saved state; set_rng_state_all would raise IndexError for a GPU this host lacks.
        for index, saved in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(torch.tensor(saved, dtype=torch.uint8), index)


# -- writing --------------------------------------------------------------------------------------------------

def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint_files(directory: str | Path, files: dict[str, bytes]) -> Path:
    """Write files plus manifest.json into directory, atomically; an existing directory is replaced."""
    final = Path(directory)
    parent = final.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        manifest = {"format_version": FORMAT_VERSION, "files": {}}
        for name, data in files.items():
            _write_synced(tmp / name, data)
            manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        _write_synced(tmp / MANIFEST_FILE, _json_bytes(manifest))
        _fsync_dir(tmp)
        if final.exists():  # e.g. a corrupted checkpoint being rewritten after falling back past it
            trash = parent / f".trash-{final.name}-{uuid.uuid4().hex[:8]}"
            os.rename(final, trash)
            os.rename(tmp, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


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
        MODEL_FILE: _encode_model(model),
        CONFIG_FILE: _json_bytes(meta),
        TOKENIZER_FILE: tokenizer.to_json_str().encode("utf-8"),
    }
    if optimizer is not None:
        files[OPTIMIZER_FILE] = _encode_optimizer(model, optimizer)
    if trainer_state is not None:
        files[TRAINER_STATE_FILE] = _json_bytes(trainer_state)
    return write_checkpoint_files(directory, files)


# -- reading --------------------------------------------------------------------------------------------------

def _read_manifest(path: Path) -> tuple[dict[str, Any], bytes]:
    manifest_path = path / MANIFEST_FILE
    if not path.is_dir():
        raise CheckpointError(f"{path} is not a checkpoint directory")
    if not manifest_path.is_file():
        raise CheckpointError(f"{manifest_path} is missing: the checkpoint is incomplete")
    raw = manifest_path.read_bytes()
    try:
        manifest = json.loads(raw)
        files = manifest["files"]
        if not isinstance(files, dict) or MODEL_FILE not in files or CONFIG_FILE not in files:
            raise ValueError(f"it must list at least {MODEL_FILE} and {CONFIG_FILE}")
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{manifest_path} is malformed: {e}") from e
    return manifest, raw


def _read_files(path: Path, verify: bool) -> tuple[dict[str, bytes], str]:
    """{file name: bytes} of the manifest's files, each checked against its sha256 when verify is True."""
    if not verify and not (path / MANIFEST_FILE).is_file():
        names = [n for n in (MODEL_FILE, OPTIMIZER_FILE, CONFIG_FILE, TOKENIZER_FILE, TRAINER_STATE_FILE)
                 if (path / n).is_file()]
        return {n: (path / n).read_bytes() for n in names}, ""
    manifest, raw = _read_manifest(path)
    out: dict[str, bytes] = {}
    for name, entry in manifest["files"].items():
        if "/" in name or name.startswith("."):
            raise CheckpointError(f"{path / MANIFEST_FILE} lists an unsafe file name {name!r}")
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{file} is listed in the manifest but missing")
        data = file.read_bytes()
        if verify:
            actual = hashlib.sha256(data).hexdigest()
            if actual != entry.get("sha256"):
                raise CheckpointError(f"{file} is corrupted: sha256 {actual} does not match the manifest's "
                                      f"{entry.get('sha256')} ({len(data)} bytes, manifest says {entry.get('size')})")
        out[name] = data
    return out, hashlib.sha256(raw).hexdigest()


def verify_checkpoint(directory: str | Path) -> str:
    """Recompute every file's sha256 against the manifest; returns checkpoint_sha256 or raises CheckpointError."""
    return _read_files(Path(directory), verify=True)[1]


def checkpoint_sha256(directory: str | Path) -> str:
    """One digest for the whole checkpoint (sha256 of manifest.json, which holds every file's sha256)."""
    _, raw = _read_manifest(Path(directory))
    return hashlib.sha256(raw).hexdigest()


def _json(data: bytes, where: Path) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{where} is not valid JSON: {e}") from e


def load_checkpoint(directory: str | Path, verify: bool = True, with_optimizer: bool = True) -> Checkpoint:
    """Read a checkpoint (tensors on CPU). verify=True refuses any file whose sha256 differs from the manifest."""
    path = Path(directory)
    files, sha = _read_files(path, verify)
    for name in (MODEL_FILE, CONFIG_FILE, TOKENIZER_FILE):
        if name not in files:
            raise CheckpointError(f"{path / name} is missing")
    meta = _json(files[CONFIG_FILE], path / CONFIG_FILE)
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
        raise CheckpointError(f"{path / TOKENIZER_FILE} has fingerprint {tokenizer.fingerprint}, but "
                              f"{CONFIG_FILE} expects {meta.get('tokenizer_fingerprint')}")
    optimizer_state = None
    if with_optimizer and OPTIMIZER_FILE in files:
        optimizer_state = _decode_optimizer(files[OPTIMIZER_FILE], path / OPTIMIZER_FILE)
    trainer_state = _json(files[TRAINER_STATE_FILE], path / TRAINER_STATE_FILE) if TRAINER_STATE_FILE in files else None
    return Checkpoint(path, sha, meta, config, tokenizer, _decode_model(files[MODEL_FILE], path / MODEL_FILE),
                      optimizer_state, trainer_state)


def latest_good_checkpoint(root: str | Path) -> Path | None:
    """The newest step checkpoint under root that passes verification and is resumable; None if there is none.

    A corrupted or torn newest checkpoint is skipped (not deleted), so training resumes from the one before.
    """
    for path in reversed(list_checkpoints(root)):
        try:
            files, _ = _read_files(path, verify=True)
        except CheckpointError as e:
            logger.warning("skipping checkpoint %s: %s", path.name, e)
            continue
        if TRAINER_STATE_FILE in files and OPTIMIZER_FILE in files:
            return path
    return None


def remove_stale_temp_dirs(root: str | Path) -> None:
    """Delete .tmp-* / .trash-* leftovers of a writer that crashed mid-checkpoint."""
    root = Path(root)
    if root.is_dir():
        for p in root.iterdir():
            if p.is_dir() and (p.name.startswith(".tmp-") or p.name.startswith(".trash-")):
                shutil.rmtree(p, ignore_errors=True)


# -- models ---------------------------------------------------------------------------------------------------

def model_from_checkpoint(ckpt: Checkpoint, device: str | torch.device = "cpu") -> Transformer:
    model = Transformer(ckpt.model_config)
    try:
        model.load_state_dict(ckpt.model_state, strict=True)
    except RuntimeError as e:
        raise CheckpointError(f"{ckpt.path / MODEL_FILE} does not fit its config: {e}") from e
    return model.to(device)


def load_model(directory: str | Path, device: str | torch.device = "cpu",
               verify: bool = True) -> tuple[Transformer, Tokenizer, dict[str, Any]]:
    """(model in eval mode on device, tokenizer, meta) for inference; meta is config.json plus path and sha256."""
    ckpt = load_checkpoint(directory, verify=verify, with_optimizer=False)
    model = model_from_checkpoint(ckpt, device).eval()
    return model, ckpt.tokenizer, {**ckpt.meta, "path": str(ckpt.path), "sha256": ckpt.sha256}


def average_checkpoints(directories: Sequence[str | Path]) -> dict[str, Tensor]:
    """Element-wise mean of the weights of checkpoints of one model (Sec. 6.1), as a full state dict.

    Every checkpoint must have the same model config and tokenizer. The mean is taken in float64 and cast
    back; tied names share one averaged tensor, as in the model.
    """
    if not directories:
        raise ValueError("average_checkpoints needs at least one checkpoint")
    ckpts = [load_checkpoint(d, with_optimizer=False) for d in directories]
    first = ckpts[0]
    for c in ckpts[1:]:
        if c.model_config != first.model_config:
            raise CheckpointError(f"{c.path} has another model config than {first.path}")
        if c.tokenizer.fingerprint != first.tokenizer.fingerprint:
            raise CheckpointError(f"{c.path} has another tokenizer than {first.path}")
    averaged: dict[str, Tensor] = {}
    by_id: dict[int, Tensor] = {}
    for name, t in first.model_state.items():
        if id(t) in by_id:  # an alias of a tied tensor already averaged
            averaged[name] = by_id[id(t)]
            continue
        if t.is_floating_point():
            total = torch.zeros_like(t, dtype=torch.float64)
            for c in ckpts:
                total += c.model_state[name].double()
            out = (total / len(ckpts)).to(t.dtype)
        else:
            out = ckpts[-1].model_state[name].clone()
        averaged[name] = by_id[id(t)] = out
    return averaged


def write_averaged_checkpoint(directories: Sequence[str | Path], directory: str | Path,
                              metrics: dict[str, float] | Callable[[Transformer], dict[str, float]] | None = None,
                              device: str | torch.device = "cpu") -> Path:
    """Average checkpoints and write the result as an inference-only checkpoint (kind "averaged"). metrics: the
    averaged model's, or a function that measures them on it (the model is on `device` then)."""
    newest = load_checkpoint(directories[-1], with_optimizer=False)
    model = Transformer(newest.model_config).to(device)
    model.load_state_dict(average_checkpoints(directories), strict=True)
    if callable(metrics):
        metrics = metrics(model)
    extra = {k: v for k, v in newest.meta.items()
             if k not in ("format_version", "kind", "objective", "step", "metrics", "model", "tokenizer_fingerprint")}
    extra["averaged_from"] = [Path(d).name for d in directories]
    return save_checkpoint(directory, model, newest.tokenizer, newest.objective, step=newest.step,
                           metrics=metrics, kind="averaged", extra_meta=extra)
