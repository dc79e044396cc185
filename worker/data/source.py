"""A dataset's file on this host, and its rows read a line at a time (gzip or not, in the artifact store or read in
place from an object-store URI)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from app.artifacts import get_store
from app.core.settings import get_settings
from app.db.tables import Dataset
from model.data.corpus import ParallelFormat, is_gzip, iter_monolingual, iter_parallel, text_lines


def local_file(dataset: Dataset) -> Path:
    """The dataset's file here: the store's own file (a local store) or its cached copy (S3), or for a dataset
    registered from a URI, a cached download of that object (DATA_DIR/cache/uri, refreshed when its ETag changes)."""
    if dataset.source_uri:
        from app.artifacts.uri import download_uri

        settings = get_settings()
        folder = hashlib.sha256(dataset.source_uri.encode()).hexdigest()[:32]
        name = dataset.source_uri.rsplit("/", 1)[-1]
        return download_uri(settings, dataset.source_uri, settings.data_dir / "cache" / "uri" / folder / name)
    return get_store().fetch(dataset.storage_key)


@contextmanager
def rows(dataset: Dataset, path: Path | None = None) -> Iterator[Iterator[tuple[Any, ...]]]:
    """(line, source, target) of a parallel dataset, (line, text) of a monolingual one, a line at a time; the first
    malformed line raises DataError naming it. A side that is empty is passed on as "": the data report counts
    those, training skips them (worker/training/job_data.py)."""
    path = path or local_file(dataset)
    with open(path, "rb") as f:
        lines = text_lines(f, compressed=is_gzip(path))
        if dataset.kind == "parallel":
            fmt = cast(ParallelFormat, dataset.format if dataset.format != "text" else "auto")
            yield iter_parallel(lines, fmt, allow_empty=True)
        else:
            yield iter_monolingual(lines)
