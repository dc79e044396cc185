"""Read a model archive someone uploads (POST /v1/models/import): unpack it safely, tell its format, load it.

Accepted: this service's `native` export (a checkpoint folder: manifest.json with every file's sha256,
config.json, model.safetensors, tokenizer.json), verified file by file and loaded into a model before anything
is kept; or a Hugging Face MarianMTModel folder as OPUS-MT publishes them (model/io/marian_import.py). An archive
is refused with ArchiveError, whose message names the problem: members that are links, devices, absolute paths
or climb out with "..", more than one top folder, an unpacked size over the limit, pickle files
(pytorch_model.bin: loading one runs code), another kind of Hugging Face folder, or a model that fails its
manifest or does not load. A native archive's manifest.json, config.json and weight metadata are checked for
shape and types before loading reads them: a forged file is refused naming the file and the field, as a corrupt
one is.
"""

from __future__ import annotations

import json
import math
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from safetensors import SafetensorError, safe_open

from model.data.tokenizer import Tokenizer
from model.io.checkpoint import load_model
from model.io.checkpoint_files import CONFIG_FILE, MANIFEST_FILE, MODEL_FILE, CheckpointError
from model.io.marian_import import MarianImportError, is_marian_folder, json_type, load_marian, read_json_object
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
NOISES = ("span", "token")  # how a denoising model was trained (model/train/prepare.py); the server reads it back


class ArchiveError(ValueError):
    """The archive cannot be imported; the message says why."""


def safe_extract(archive: str | Path, dest: str | Path, max_bytes: int) -> Path:
    """Unpack a .tar.gz into dest (empty) after checking every member; returns its one top folder."""
    dest = Path(dest)
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            tops, total = set(), 0
            for m in members:
                path = PurePosixPath(m.name)
                if path.is_absolute() or ".." in path.parts:
                    raise ArchiveError(f"archive member {m.name!r} points outside the archive")
                if not (m.isfile() or m.isdir()):
                    raise ArchiveError(f"archive member {m.name!r} is a link or a device; only files and folders")
                if m.name.lower().endswith(PICKLE_SUFFIXES):
                    raise ArchiveError(
                        f"archive member {m.name!r} is a pickle file, refused: loading one runs code; "
                        "save the weights as safetensors"
                    )
                total += m.size
                if total > max_bytes:
                    raise ArchiveError(f"the archive unpacks to more than {max_bytes} bytes")
                if path.parts and path.parts[0] != ".":
                    tops.add(path.parts[0])
            if len(tops) != 1:
                raise ArchiveError(f"the archive must hold one folder, not {sorted(tops)[:5]}")
            tar.extractall(dest, members=members, filter="data")  # the same checks again, by the library
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"not a readable .tar.gz archive ({type(exc).__name__}: {exc})") from exc
    top = dest / tops.pop()
    if not top.is_dir():
        raise ArchiveError(f"the archive's top entry {top.name!r} is a file, not a folder")
    return top


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON file of the archive that must hold an object; ArchiveError names it otherwise."""
    if not path.is_file():
        raise ArchiveError(f"{path.name} is missing")
    try:
        return read_json_object(path)
    except MarianImportError as exc:
        raise ArchiveError(str(exc)) from exc


def _check_manifest(folder: Path) -> None:
    """manifest.json: {"files": {name: {"sha256": str, ...}}}, as the checkpoint reader expects; and each JSON
    file it lists (config, tokenizer, trainer state) an object, which the reader assumes."""
    files = _json_object(folder / MANIFEST_FILE).get("files")
    if not isinstance(files, dict):
        raise ArchiveError(f"{MANIFEST_FILE}: 'files' must be an object of file name -> entry, not {json_type(files)}")
    for name, entry in files.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise ArchiveError(f"{MANIFEST_FILE}: files[{name!r}] must be an object with a 'sha256' string")
        if name.endswith(".json") and "/" not in name and (folder / name).is_file():
            _json_object(folder / name)


def _check_meta(folder: Path) -> None:
    """config.json's fields that loading and the import read, so that a forged one is refused naming them."""
    meta = _json_object(folder / CONFIG_FILE)
    if not isinstance(meta.get("model"), dict):
        raise ArchiveError(
            f"{CONFIG_FILE}: 'model' must be an object of ModelConfig fields, not {json_type(meta.get('model'))}"
        )
    try:
        ModelConfig.from_dict(meta["model"])
    except ValueError as exc:
        raise ArchiveError(f"{CONFIG_FILE}: model: {exc}") from exc
    step = meta.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ArchiveError(f"{CONFIG_FILE}: step={step!r} must be a non-negative integer")
    metrics = meta.get("metrics", {})
    if not isinstance(metrics, dict):
        raise ArchiveError(f"{CONFIG_FILE}: 'metrics' must be an object of name -> number, not {json_type(metrics)}")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ArchiveError(f"{CONFIG_FILE}: metrics[{name!r}]={value!r} must be a finite number")
    if meta.get("noise", "span") not in NOISES:
        raise ArchiveError(f"{CONFIG_FILE}: noise={meta.get('noise')!r} is not one of {NOISES}")


def _check_weights(folder: Path) -> None:
    """model.safetensors' header, and its metadata's tied names ("aliases": {name: stored name}), which the
    checkpoint reader follows."""
    try:
        with safe_open(str(folder / MODEL_FILE), framework="pt") as weights:
            stored, metadata = set(weights.keys()), weights.metadata() or {}
    except SafetensorError as exc:
        raise ArchiveError(f"{MODEL_FILE}: not a safetensors file ({exc})") from exc
    except OSError as exc:  # missing, or a folder by that name
        raise ArchiveError(f"{MODEL_FILE}: not a readable file ({exc.strerror})") from exc
    try:
        aliases = json.loads(metadata.get("aliases", "{}"))
    except ValueError as exc:
        raise ArchiveError(f"{MODEL_FILE}: its metadata's 'aliases' is not JSON ({exc})") from exc
    if not isinstance(aliases, dict) or not all(isinstance(v, str) and v in stored for v in aliases.values()):
        raise ArchiveError(f"{MODEL_FILE}: its metadata's 'aliases' must map names to tensors the file stores")


def _load_native(folder: Path) -> tuple[Transformer, Tokenizer, dict[str, Any]]:
    """A native export, its files' shapes and types checked first: the checkpoint reader trusts them."""
    _check_manifest(folder)
    _check_meta(folder)
    _check_weights(folder)
    try:
        return load_model(folder, "cpu")
    except (CheckpointError, ValueError, KeyError, RuntimeError) as exc:
        raise ArchiveError(f"the checkpoint in {folder.name!r} does not load: {exc}") from exc


def _not_importable(folder: Path) -> ArchiveError:
    """Why a folder that is neither a native export nor a Marian model is refused."""
    if not (folder / "config.json").is_file():
        return ArchiveError(f"{folder.name!r} holds no manifest.json: not a model exported with format=native")
    try:
        read_json_object(folder / "config.json")
    except (OSError, MarianImportError) as exc:
        return ArchiveError(f"{folder.name!r} holds no manifest.json, and {exc}")
    return ArchiveError(
        f"{folder.name!r} has a config.json that is not a MarianMTModel's (model_type 'marian'): only Marian "
        "models and this service's native export can be imported"
    )


def load_archive_folder(folder: Path) -> tuple[Transformer, Tokenizer, dict[str, Any]]:
    """The model in an unpacked archive folder (native format), verified against its manifest."""
    if (folder / MANIFEST_FILE).is_file():
        model, tokenizer, meta = _load_native(folder)
        if tokenizer.vocab_size != model.config.vocab_size:
            raise ArchiveError(
                f"the tokenizer has {tokenizer.vocab_size} tokens but the weights {model.config.vocab_size} rows: "
                "they do not belong together"
            )
        return model, tokenizer, meta
    if is_marian_folder(folder):
        try:
            model, tokenizer = load_marian(folder)
        except (MarianImportError, OSError, RuntimeError) as exc:
            raise ArchiveError(f"the Marian model in {folder.name!r} cannot be imported: {exc}") from exc
        return model, tokenizer, {"objective": "translation", "metrics": {}, "imported_format": "marian"}
    raise _not_importable(folder)
