"""A checkpoint directory on disk: written atomically, every file hashed in manifest.json, verified on read.

    step-00001000/
        model.safetensors      weights (model/io/checkpoint_tensors.py)
        optimizer.safetensors  optimizer tensors and groups (model/io/checkpoint_tensors.py)
        config.json            ModelConfig, objective, tokenizer fingerprint, step, metrics, kind
        tokenizer.json         the tokenizer the model was trained with
        trainer_state.json     step, best metric, schedule, batcher position, RNG states, elapsed time
        manifest.json          sha256 and size of every other file; written last

A directory is built under a temporary name in the same parent, every file and the directory fsynced, then
renamed into place, so a crash leaves either no checkpoint or a whole one. What the files mean is
model/io/checkpoint.py's business; this module only knows names, bytes and hashes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
TRAINER_STATE_FILE = "trainer_state.json"
MANIFEST_FILE = "manifest.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, corrupted, or does not fit the model it is loaded into."""


# -- names ----------------------------------------------------------------------------------------------------


def step_dir(root: str | Path, step: int) -> Path:
    """ROOT/step-00001000: zero-padded so that names sort like steps."""
    return Path(root) / f"step-{step:08d}"


def step_of(directory: str | Path) -> int | None:
    """The step of a step checkpoint directory (step_dir's name); None for any other name."""
    found = _STEP_DIR.match(Path(directory).name)
    return int(found.group(1)) if found else None


def list_checkpoints(root: str | Path) -> list[Path]:
    """Step checkpoint directories under root, oldest step first (temporary and averaged ones excluded)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [(step, p) for p in root.iterdir() if p.is_dir() and (step := step_of(p)) is not None]
    return [p for _, p in sorted(found)]


def remove_stale_temp_dirs(root: str | Path) -> None:
    """Delete .tmp-* / .trash-* leftovers of a writer that crashed mid-checkpoint."""
    root = Path(root)
    if root.is_dir():
        for p in root.iterdir():
            if p.is_dir() and (p.name.startswith(".tmp-") or p.name.startswith(".trash-")):
                shutil.rmtree(p, ignore_errors=True)


def rotate_checkpoints(root: str | Path, keep_last: int, keep: str | Path | None = None) -> None:
    """Delete the step checkpoints under root older than the newest keep_last (>= 1); `keep` (the best one) stays."""
    for path in list_checkpoints(root)[:-keep_last]:
        if keep is None or path != Path(keep):
            shutil.rmtree(path, ignore_errors=True)


# -- writing --------------------------------------------------------------------------------------------------


def json_bytes(obj: Any) -> bytes:
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
        manifest: dict[str, Any] = {"format_version": FORMAT_VERSION, "files": {}}
        for name, data in files.items():
            _write_synced(tmp / name, data)
            manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        _write_synced(tmp / MANIFEST_FILE, json_bytes(manifest))
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


def read_checkpoint_files(path: Path, verify: bool) -> tuple[dict[str, bytes], str]:
    """{file name: bytes} of the manifest's files, each checked against its sha256 when verify is True."""
    if not verify and not (path / MANIFEST_FILE).is_file():
        names = [
            n
            for n in (MODEL_FILE, OPTIMIZER_FILE, CONFIG_FILE, TOKENIZER_FILE, TRAINER_STATE_FILE)
            if (path / n).is_file()
        ]
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
                raise CheckpointError(
                    f"{file} is corrupted: sha256 {actual} does not match the manifest's "
                    f"{entry.get('sha256')} ({len(data)} bytes, manifest says {entry.get('size')})"
                )
        out[name] = data
    return out, hashlib.sha256(raw).hexdigest()


def verify_checkpoint(directory: str | Path) -> str:
    """Recompute every file's sha256 against the manifest; returns checkpoint_sha256 or raises CheckpointError."""
    return read_checkpoint_files(Path(directory), verify=True)[1]


def checkpoint_sha256(directory: str | Path) -> str:
    """One digest for the whole checkpoint (sha256 of manifest.json, which holds every file's sha256)."""
    _, raw = _read_manifest(Path(directory))
    return hashlib.sha256(raw).hexdigest()


def parse_json(data: bytes, where: Path) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{where} is not valid JSON: {e}") from e
