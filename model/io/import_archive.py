"""Read a model archive someone uploads (POST /v1/models/import): unpack it safely, tell its format, load it.

Accepted: this service's `native` export (a checkpoint folder: manifest.json with every file's sha256,
config.json, model.safetensors, tokenizer.json), verified file by file and loaded into a model before anything
is kept; or a Hugging Face MarianMTModel folder as OPUS-MT publishes them (model/io/marian_import.py). An archive
is refused with ArchiveError, whose message names the problem: members that are links, devices, absolute paths
or climb out with "..", more than one top folder, pickle files (pytorch_model.bin: loading one runs code),
another kind of Hugging Face folder, or a model that fails its manifest or does not load. It is read a member at
a time (model/io/archive_stream.py) and refused at the first past a limit, before a byte more is unpacked: too
many members, too many bytes in all, a JSON file or SentencePiece model too large to parse. A native archive's
manifest.json, config.json and weight metadata are checked for shape and types before loading reads them, its
dimensions against the limits and its weights' shapes (the safetensors header) against its config before any
model is built (model/io/import_limits.py): a forged file is refused naming the file and the field.
"""

from __future__ import annotations

import itertools
import json
import lzma
import math
import shutil
import tarfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from safetensors import SafetensorError

from model.data.tokenizer import Tokenizer
from model.io.archive_stream import ArchiveError, open_tar, stream_limit
from model.io.checkpoint import load_model
from model.io.checkpoint_files import CONFIG_FILE, MANIFEST_FILE, MODEL_FILE, TOKENIZER_FILE, CheckpointError
from model.io.import_limits import ModelLimits, check_dimensions, compare_shapes, expected_shapes, header
from model.io.marian_import import MarianImportError, is_marian_folder, json_type, load_marian, read_json_object
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
PARSED_SUFFIXES = (".json", ".spm", ".model")  # files an import reads whole and parses: bounded by max_metadata_bytes
NOISES = ("span", "token")  # how a denoising model was trained (model/train/prepare.py); the server reads it back
MAX_MEMBERS = 100  # the service's IMPORT_MAX_MEMBERS default
MAX_METADATA_BYTES = 32 << 20  # the service's IMPORT_MAX_METADATA_MB default
__all__ = ["ArchiveError", "ModelLimits", "load_archive_folder", "safe_extract"]


def _checked_path(m: tarfile.TarInfo) -> PurePosixPath:
    """A member's path, refused when it climbs out, is not a file or folder, or is a pickle."""
    path = PurePosixPath(m.name)
    if path.is_absolute() or ".." in path.parts:
        raise ArchiveError(f"archive member {m.name!r} points outside the archive")
    if not (m.isfile() or m.isdir()):
        raise ArchiveError(f"archive member {m.name!r} is a link or a device; only files and folders")
    if m.name.lower().endswith(PICKLE_SUFFIXES):
        raise ArchiveError(
            f"archive member {m.name!r} is a pickle file, refused: loading one runs code; save the weights as "
            "safetensors"
        )
    return path


def _extract(archive: Path, dest: Path, max_bytes: int, max_members: int, max_metadata_bytes: int) -> str:
    """Each member checked, then written, one at a time; the archive's one top folder."""
    tops: set[str] = set()
    total = 0
    try:
        with open_tar(archive, stream_limit(max_bytes, max_members)) as tar:
            for count in itertools.count(1):
                m = tar.next()
                if m is None:
                    break
                if count > max_members:
                    raise ArchiveError(
                        f"the archive holds more than {max_members} members (IMPORT_MAX_MEMBERS={max_members})"
                    )
                path = _checked_path(m)
                total += m.size
                if total > max_bytes:
                    raise ArchiveError(f"the archive unpacks to more than {max_bytes} bytes")
                if m.isfile() and m.name.lower().endswith(PARSED_SUFFIXES) and m.size > max_metadata_bytes:
                    raise ArchiveError(
                        f"archive member {m.name!r} unpacks to {m.size} bytes: more than the {max_metadata_bytes} a "
                        f"JSON file or SentencePiece model may hold (IMPORT_MAX_METADATA_MB={max_metadata_bytes >> 20})"
                    )
                if path.parts and path.parts[0] != ".":
                    tops.add(path.parts[0])
                if len(tops) > 1:
                    raise ArchiveError(f"the archive must hold one folder, not {sorted(tops)[:5]}")
                tar.extract(m, dest, filter="data")  # the same checks again, by the library
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        raise ArchiveError(f"not a readable .tar.gz archive ({type(exc).__name__}: {exc})") from exc
    if len(tops) != 1:
        raise ArchiveError(f"the archive must hold one folder, not {sorted(tops)[:5]}")
    return tops.pop()


def safe_extract(
    archive: str | Path,
    dest: str | Path,
    max_bytes: int,
    max_members: int = MAX_MEMBERS,
    max_metadata_bytes: int = MAX_METADATA_BYTES,
) -> Path:
    """Unpack a tar archive (gzip, bzip2, xz or none) into dest (empty) a member at a time, each checked before a
    byte of it is written; the first past a limit stops the reading (ArchiveError naming it) and dest is removed:
    more than max_members members, more than max_bytes in all, a file that is parsed whole (JSON, SentencePiece)
    over max_metadata_bytes, a header longer than a header may be. Returns the archive's one top folder."""
    dest = Path(dest)
    try:
        top = dest / _extract(Path(archive), dest, max_bytes, max_members, max_metadata_bytes)
        if not top.is_dir():
            raise ArchiveError(f"the archive's top entry {top.name!r} is a file, not a folder")
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
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


def _check_meta(folder: Path, limits: ModelLimits) -> ModelConfig:
    """config.json's fields that loading and the import read, so that a forged one is refused naming them; its
    model's dimensions within `limits`. Returns the model's config."""
    meta = _json_object(folder / CONFIG_FILE)
    if not isinstance(meta.get("model"), dict):
        raise ArchiveError(
            f"{CONFIG_FILE}: 'model' must be an object of ModelConfig fields, not {json_type(meta.get('model'))}"
        )
    try:
        config = ModelConfig.from_dict(meta["model"])
        check_dimensions(config.to_dict(), limits)
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
    return config


def _check_weights(folder: Path, config: ModelConfig) -> None:
    """model.safetensors' header: its metadata's tied names ("aliases": {name: stored name}), which the checkpoint
    reader follows, and every tensor's shape the one config implies, before a model is built or a tensor read."""
    try:
        stored, metadata = header(folder / MODEL_FILE)
    except SafetensorError as exc:
        raise ArchiveError(f"{MODEL_FILE}: not a safetensors file ({exc})") from exc
    except OSError as exc:  # missing, or a folder by that name
        raise ArchiveError(f"{MODEL_FILE}: not a readable file ({exc.strerror})") from exc
    except ValueError as exc:
        raise ArchiveError(f"{MODEL_FILE}: {exc}") from exc
    try:
        aliases = json.loads(metadata.get("aliases", "{}"))
    except ValueError as exc:
        raise ArchiveError(f"{MODEL_FILE}: its metadata's 'aliases' is not JSON ({exc})") from exc
    if not isinstance(aliases, dict) or not all(isinstance(v, str) and v in stored for v in aliases.values()):
        raise ArchiveError(f"{MODEL_FILE}: its metadata's 'aliases' must map names to tensors the file stores")
    try:
        compare_shapes({**stored, **{alias: stored[name] for alias, name in aliases.items()}}, expected_shapes(config))
    except ValueError as exc:
        raise ArchiveError(f"{MODEL_FILE}: {exc} ({CONFIG_FILE}'s model)") from exc


def _check_tokenizer(folder: Path, limits: ModelLimits) -> None:
    """tokenizer.json's vocabulary within the limit on vocab_size, before the tokenizer is built from it."""
    model = _json_object(folder / TOKENIZER_FILE).get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    size = len(vocab) if isinstance(vocab, dict | list) else 0
    if size > limits.vocab_size:
        raise ArchiveError(
            f"{TOKENIZER_FILE}: its vocabulary of {size} tokens is over the import limit of {limits.vocab_size} "
            f"(IMPORT_MAX_VOCAB_SIZE={limits.vocab_size})"
        )


def _load_native(folder: Path, limits: ModelLimits) -> tuple[Transformer, Tokenizer, dict[str, Any]]:
    """A native export, its files' shapes, types and sizes checked first: the checkpoint reader trusts them."""
    _check_manifest(folder)
    config = _check_meta(folder, limits)
    _check_weights(folder, config)
    _check_tokenizer(folder, limits)
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


def load_archive_folder(
    folder: Path, limits: ModelLimits | None = None
) -> tuple[Transformer, Tokenizer, dict[str, Any]]:
    """The model in an unpacked archive folder (native format, verified against its manifest, or Marian), its
    dimensions within `limits` (default: ModelLimits()) and its weights' shapes its config's, checked before the
    model is built."""
    limits = limits or ModelLimits()
    if (folder / MANIFEST_FILE).is_file():
        model, tokenizer, meta = _load_native(folder, limits)
        if tokenizer.vocab_size != model.config.vocab_size:
            raise ArchiveError(
                f"the tokenizer has {tokenizer.vocab_size} tokens but the weights {model.config.vocab_size} rows: "
                "they do not belong together"
            )
        return model, tokenizer, meta
    if is_marian_folder(folder):
        try:
            model, tokenizer = load_marian(folder, limits)
        except (MarianImportError, OSError, RuntimeError) as exc:
            raise ArchiveError(f"the Marian model in {folder.name!r} cannot be imported: {exc}") from exc
        return model, tokenizer, {"objective": "translation", "metrics": {}, "imported_format": "marian"}
    raise _not_importable(folder)
