"""Uploading a large file with a progress bar: the file is streamed by httpx's multipart encoder a chunk at a time
(never read whole), and each chunk it reads advances a rich progress bar on a terminal's stderr."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, BinaryIO, cast

import httpx
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn


class ProgressFile:
    """A file whose reads advance a progress task; httpx measures it with fileno() and rewinds it with seek()."""

    def __init__(self, f: BinaryIO, progress: Progress | None, task: Any) -> None:
        self.f, self.progress, self.task = f, progress, task

    def fileno(self) -> int:
        return self.f.fileno()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        position = self.f.seek(offset, whence)
        if self.progress is not None:
            self.progress.update(self.task, completed=self.f.tell())
        return position

    def tell(self) -> int:
        return self.f.tell()

    def read(self, size: int = -1) -> bytes:
        chunk = self.f.read(size)
        if self.progress is not None:
            self.progress.advance(self.task, len(chunk))
        return chunk


def post_file(
    client: httpx.Client,
    url: str,
    file: Path,
    data: dict[str, str] | None = None,
    timeout: float = 3600,
    show: bool | None = None,
) -> httpx.Response:
    """POST a multipart form with `file`, showing the bytes sent (a bar on a terminal; nothing when piped)."""
    show = sys.stderr.isatty() if show is None else show
    size = file.stat().st_size
    with open(file, "rb") as f:
        if not show:
            return client.post(url, data=data, files={"file": (file.name, f)}, timeout=timeout)
        columns = (
            TextColumn(f"uploading {file.name}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, transient=True) as progress:
            task = progress.add_task("upload", total=size)
            counted = cast(BinaryIO, ProgressFile(f, progress, task))  # read, seek, tell and fileno are all httpx uses
            return client.post(url, data=data, files={"file": (file.name, counted)}, timeout=timeout)
