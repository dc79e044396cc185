"""Read a model archive someone uploads (POST /v1/models/import): unpack it safely, tell its format, load it.

Accepted: this service's `native` export (a checkpoint folder: manifest.json with every file's sha256,
config.json, model.safetensors, tokenizer.json), verified file by file and loaded into a model before anything
is kept; or a Hugging Face MarianMTModel folder as OPUS-MT publishes them (model/marian_import.py). An archive
is refused with ArchiveError, whose message names the problem: members that are links, devices, absolute paths
or climb out with "..", more than one top folder, an unpacked size over the limit, pickle files
(pytorch_model.bin: loading one runs code), another kind of Hugging Face folder, or a model that fails its
manifest or does not load.
"""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from model.checkpoint import load_model
from model.checkpoint_files import MANIFEST_FILE, CheckpointError
from model.marian_import import MarianImportError, is_marian_folder, load_marian
from model.tokenizer import Tokenizer
from model.transformer import Transformer

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


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


def load_archive_folder(folder: Path) -> tuple[Transformer, Tokenizer, dict[str, Any]]:
    """The model in an unpacked archive folder (native format), verified against its manifest."""
    if (folder / MANIFEST_FILE).is_file():
        try:
            model, tokenizer, meta = load_model(folder, "cpu")
        except (CheckpointError, ValueError, KeyError, RuntimeError) as exc:
            raise ArchiveError(f"the checkpoint in {folder.name!r} does not load: {exc}") from exc
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
    if (folder / "config.json").is_file():
        raise ArchiveError(
            f"{folder.name!r} has a config.json that is not a MarianMTModel's (model_type 'marian'): only Marian "
            "models and this service's native export can be imported"
        )
    raise ArchiveError(f"{folder.name!r} holds no manifest.json: not a model exported with format=native")
