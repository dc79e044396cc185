"""The local-folder store: the default, or a volume that every host mounts."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from app.artifacts.store import CHUNK_BYTES, TEMP_PREFIX, ArtifactNotFound, ArtifactStore, key_parts


class LocalStore(ArtifactStore):
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def local_path(self, key: str) -> Path:
        return self.root.joinpath(*key_parts(key))

    def write_bytes(self, key: str, data: bytes) -> int:
        """Write atomically: a temporary file in the same folder, fsync, then rename."""
        target = self.local_path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TEMP_PREFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return len(data)

    def write_stream(self, key: str, stream: BinaryIO) -> int:
        """As write_bytes, a chunk at a time."""
        target = self.local_path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TEMP_PREFIX)
        size = 0
        try:
            with os.fdopen(fd, "wb") as f:
                while chunk := stream.read(CHUNK_BYTES):
                    f.write(chunk)
                    size += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return size

    def read_bytes(self, key: str) -> bytes:
        path = self.local_path(key)
        if not path.is_file():
            raise ArtifactNotFound(f"artifact {key!r} not found in {self.root}")
        return path.read_bytes()

    def exists(self, key: str) -> bool:
        return self.local_path(key).exists()

    def delete(self, key: str) -> None:
        target = self.local_path(key)
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)

    def list_files(self, folder: str) -> list[tuple[str, datetime]]:
        root = self.local_path(folder)
        out = []
        for path in sorted(root.rglob("*")) if root.is_dir() else ():
            if path.name.startswith(TEMP_PREFIX) or not path.is_file():
                continue
            try:
                written = datetime.fromtimestamp(path.stat().st_mtime, UTC)
            except FileNotFoundError:  # deleted meanwhile
                continue
            out.append(("/".join((*key_parts(folder), *path.relative_to(root).parts)), written))
        return out

    def fetch(self, key: str, missing_ok: bool = False) -> Path:
        path = self.local_path(key)
        if not missing_ok and not path.exists():
            raise ArtifactNotFound(f"artifact {key!r} not found in {self.root}")
        return path

    def push(self, source: str | Path, key: str) -> None:
        """Nothing to do when source is already the key's path; otherwise copy it in, then rename into place."""
        source, target = Path(source).resolve(), self.local_path(key)
        if source == target:
            return
        if not source.exists():
            raise FileNotFoundError(f"cannot push {source}: it does not exist")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f"{TEMP_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
        try:
            if source.is_dir():
                shutil.copytree(source, tmp)
            else:
                shutil.copyfile(source, tmp)
            if target.is_dir():  # swap folders: the old one moves aside, the new one takes its name
                trash = target.parent / f"{TEMP_PREFIX}trash-{uuid.uuid4().hex[:8]}"
                os.rename(target, trash)
                os.rename(tmp, target)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
            raise
