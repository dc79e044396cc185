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
from model.data.corpus import ParallelFormat, ReadLimits, is_gzip, iter_monolingual, iter_parallel, text_lines

MB = 1024 * 1024


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


def read_limits(path: Path) -> ReadLimits:
    """The bounds on reading a dataset's file (MAX_DATASET_LINE_KB, DATASET_UNPACKED_RATIO): a line's bytes, and
    what a gzip file may unpack to, a multiple of MAX_DATASET_MB or of the file's own size if larger."""
    settings = get_settings()
    stored = path.stat().st_size
    base, base_name = (
        (settings.max_dataset_mb * MB, f"MAX_DATASET_MB={settings.max_dataset_mb}")
        if stored <= settings.max_dataset_mb * MB
        else (stored, f"the file's {stored} bytes")
    )
    return ReadLimits(
        line_bytes=settings.max_dataset_line_kb * 1024,
        unpacked_bytes=base * settings.dataset_unpacked_ratio,
        line_limit=f"MAX_DATASET_LINE_KB={settings.max_dataset_line_kb}",
        unpacked_limit=f"DATASET_UNPACKED_RATIO={settings.dataset_unpacked_ratio} times {base_name}",
    )


@contextmanager
def rows(dataset: Dataset, path: Path | None = None) -> Iterator[Iterator[tuple[Any, ...]]]:
    """(line, source, target) of a parallel dataset, (line, text) of a monolingual one, a line at a time; the first
    malformed line, or one over the limits (read_limits), raises DataError naming it. A side that is empty is passed
    on as "": the data report counts those, training skips them (worker/training/job_data.py)."""
    path = path or local_file(dataset)
    with open(path, "rb") as f:
        lines = text_lines(f, compressed=is_gzip(path), limits=read_limits(path))
        if dataset.kind == "parallel":
            fmt = cast(ParallelFormat, dataset.format if dataset.format != "text" else "auto")
            yield iter_parallel(lines, fmt, allow_empty=True)
        else:
            yield iter_monolingual(lines)
