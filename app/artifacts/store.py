"""What every artifact store offers, and the rules for keys."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

# A folder's file that is written last and read first: whoever sees it sees the whole folder
# (a checkpoint's or a model's manifest, which holds the sha256 of every other file).
COMMIT_FILE = "manifest.json"
TEMP_PREFIX = ".tmp-"  # names of files and folders still being written
CHUNK_BYTES = 1 << 20  # what a streamed write reads at a time


class ArtifactStoreError(Exception):
    """The store cannot be reached or refused a request; the message names the store and the key."""


class ArtifactNotFound(ArtifactStoreError, FileNotFoundError):
    """No file and no folder under this key."""


def key_parts(key: str) -> tuple[str, ...]:
    """("datasets", "<id>", "data.jsonl") for "datasets/<id>/data.jsonl"; ValueError for keys that could escape."""
    parts = tuple(key.split("/"))
    if "\\" in key or any(p in ("", ".", "..") or p.startswith(TEMP_PREFIX) for p in parts):
        raise ValueError(
            f"invalid artifact key {key!r}: it must be relative, without empty, '.', '..' "
            f"or {TEMP_PREFIX}* parts or backslashes"
        )
    return parts


class ArtifactStore(ABC):
    """Datasets, tokenizers, checkpoints and models under relative keys.

    A key names a file or a folder of files (a prefix). Writers make a whole file or folder locally and push it;
    readers fetch it and get a local path. Local stores hand out their own files; remote ones a local cache.
    """

    @abstractmethod
    def write_bytes(self, key: str, data: bytes) -> int:
        """Store one file, all or nothing; returns its size."""

    @abstractmethod
    def write_stream(self, key: str, stream: BinaryIO) -> int:
        """Store one file read from a file object to its end, in constant memory, all or nothing; returns its size."""

    @abstractmethod
    def read_bytes(self, key: str) -> bytes:
        """One file's bytes; ArtifactNotFound when there is none."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """True if the key is a file or a folder holding at least one file."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete a file or a whole folder; missing is fine."""

    @abstractmethod
    def list_files(self, folder: str) -> list[tuple[str, datetime]]:
        """(key, when it was last written) of every stored file under the folder key, at any depth; [] when there
        is none. Files still being written are not listed."""

    @abstractmethod
    def local_path(self, key: str) -> Path:
        """Where the key lives (or would live) on this machine; write there, then push."""

    @abstractmethod
    def fetch(self, key: str, missing_ok: bool = False) -> Path:
        """Make a file or folder available locally and return its path (ArtifactNotFound unless missing_ok)."""

    @abstractmethod
    def push(self, source: str | Path, key: str) -> None:
        """Store a local file or folder under key, replacing what was there; a folder's COMMIT_FILE goes last."""

    def in_use(self, key: str) -> AbstractContextManager[None]:
        """While open, this host keeps its local copy of the key's folder (a remote store's cache trimming skips
        it). Local stores hand out their own files and keep everything."""
        return nullcontext()
