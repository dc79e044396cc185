"""The artifact store: datasets, tokenizers, checkpoints and models, addressed by keys the server makes.

Keys are relative ("datasets/<id>/data.jsonl"); the database stores keys, never absolute paths, and
clients never see either.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path, PurePosixPath

from app.settings import get_settings


class ArtifactStore:
    """A local folder (the default; a shared volume in production)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def path(self, key: str) -> Path:
        parts = PurePosixPath(key).parts
        if not parts or key.startswith("/") or any(p in ("..", ".") for p in parts):
            raise ValueError(f"invalid artifact key {key!r}")
        return self.root.joinpath(*parts)

    def write_bytes(self, key: str, data: bytes) -> int:
        """Write atomically: a temporary file in the same folder, fsync, then rename."""
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
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

    def read_bytes(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def exists(self, key: str) -> bool:
        return self.path(key).exists()

    def delete(self, key: str) -> None:
        """Delete a file or a folder of files; missing is fine."""
        target = self.path(key)
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)


@lru_cache
def get_store() -> ArtifactStore:
    return ArtifactStore(get_settings().artifact_root)
