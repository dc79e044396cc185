"""Keeping a remote store's local cache within a size: the least recently used files go first.

The cache mirrors the store file by file, and every fetch checks each file against the store (size, ETag) and
downloads what is missing. So any file may be deleted at any time without harm beyond a download; trimming
deletes whole files, oldest use first, where "use" is the file's mtime, which a fetch refreshes. Files used in
the last `keep_seconds` (a model being loaded, a checkpoint written but not yet pushed) and files still being
written (`.tmp-*`) are never deleted, even when that leaves the cache over its size; neither is a folder
pinned by a live process (a training run's checkpoints, which it reads again when it averages or publishes).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.artifacts.store import TEMP_PREFIX


@dataclass(frozen=True)
class Trimmed:
    removed_files: int
    freed_bytes: int
    remaining_bytes: int  # may stay above the limit when the rest is in use or being written


def touch(path: Path) -> None:
    """Mark a cached file as used now."""
    try:
        os.utime(path)
    except FileNotFoundError:
        pass


PIN_PREFIX = f"{TEMP_PREFIX}pin-"  # a temporary name: never pushed, never mirrored away by a fetch


@contextmanager
def pinned(folder: Path) -> Iterator[None]:
    """While open, `trim` leaves `folder` and everything under it alone (the pin names this process)."""
    folder.mkdir(parents=True, exist_ok=True)
    pin = folder / f"{PIN_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    pin.touch()
    try:
        yield
    finally:
        pin.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process, alive
        return True
    return True


def _is_pinned(folder: str, names: list[str]) -> bool:
    """True if a live process pins this folder; pins of dead processes are removed."""
    pinned_now = False
    for name in names:
        if not name.startswith(PIN_PREFIX):
            continue
        pid = name[len(PIN_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and _alive(int(pid)):
            pinned_now = True
        else:
            Path(folder, name).unlink(missing_ok=True)
    return pinned_now


def _size(folder: str) -> int:
    total = 0
    for base, _dirs, names in os.walk(folder):
        for name in names:
            try:
                total += os.stat(os.path.join(base, name)).st_size
            except FileNotFoundError:
                pass
    return total


def _scan(root: Path) -> tuple[list[tuple[float, int, Path]], int]:
    """(mtime, size, path) of every file trim may delete, oldest first, and the bytes of those it may not (being
    written, or in a pinned folder)."""
    candidates, kept = [], 0
    for folder, dirs, names in os.walk(root):
        if _is_pinned(folder, names):
            kept += _size(folder)
            dirs[:] = []
            continue
        for d in [d for d in dirs if d.startswith(TEMP_PREFIX)]:
            kept += _size(os.path.join(folder, d))
        dirs[:] = [d for d in dirs if not d.startswith(TEMP_PREFIX)]
        for name in names:
            try:
                stat = os.stat(os.path.join(folder, name))
            except FileNotFoundError:  # deleted meanwhile by another process
                continue
            if name.startswith(TEMP_PREFIX):
                kept += stat.st_size
            else:
                candidates.append((stat.st_mtime, stat.st_size, Path(folder, name)))
    return sorted(candidates), kept


def trim(root: Path, max_bytes: int, keep_seconds: float) -> Trimmed:
    """Delete the least recently used files under root until it holds at most max_bytes."""
    files, kept = _scan(root)
    total = kept + sum(size for _, size, _ in files)
    removed, freed = 0, 0
    horizon = time.time() - keep_seconds
    for mtime, size, path in files:
        if total - freed <= max_bytes or mtime > horizon:
            break  # oldest first: every later file is newer
        try:
            if path.stat().st_mtime > horizon:  # used since the scan
                continue
            path.unlink()
        except FileNotFoundError:
            continue
        removed, freed = removed + 1, freed + size
        _remove_empty_parents(path.parent, root)
    return Trimmed(removed, freed, total - freed)


def _remove_empty_parents(folder: Path, root: Path) -> None:
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            return
        folder = folder.parent
