"""Parse and check a stored dataset, a line at a time: its format, rows, statistics and data report
(model/data/report.py, two passes over the file), or the first malformed line.

processing -> ready | failed, by a conditional UPDATE: a redelivered task finds the dataset no longer processing and
does nothing; one that died half-way is redelivered and starts again from the file, which never changed.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

from sqlalchemy import update

from app.artifacts import ArtifactStoreError
from app.artifacts.uri import UriError
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import Dataset
from app.services import webhooks
from model.data.corpus import CorpusStats, DataError, is_gzip, sniff_format, text_lines
from model.data.report import ReportBuilder
from worker.data.source import local_file, read_limits, rows

log = logging.getLogger(__name__)
HASH_CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _format(dataset: Dataset, path: Path) -> str:
    """The stored format, or for auto, what the first non-blank line says (sniff_format)."""
    if dataset.kind == "monolingual" or dataset.format != "auto":
        return dataset.format
    with open(path, "rb") as f:
        first = next(text_lines(f, compressed=is_gzip(path), limits=read_limits(path)), None)
    return sniff_format(first[1]) if first else "tsv"


def finish(dataset_id: str, **values: Any) -> bool:
    """Record the outcome unless another run already did (the dataset is no longer processing); a final status
    emits dataset.ready or dataset.failed to the owner's webhooks in the same transaction."""
    with session_scope() as session:
        done = session.execute(
            update(Dataset)
            .where(Dataset.id == dataset_id, Dataset.status == "processing")
            .values(processed_at=utcnow(), **values)
        )
        if not getattr(done, "rowcount", 0):
            return False
        status = values.get("status")
        dataset = session.get(Dataset, dataset_id)
        if dataset is not None and status in ("ready", "failed"):
            data = {
                "dataset_id": dataset_id,
                "name": dataset.name,
                "status": status,
                "rows": dataset.rows,
                "parent_id": dataset.parent_id,
                "link": f"/v1/datasets/{dataset_id}",
                **({"error": dataset.error, "error_line": dataset.error_line} if status == "failed" else {}),
            }
            webhooks.emit(session, dataset.owner_id, f"dataset.{status}", data)
        return True


def process(dataset_id: str) -> str:
    """Parse the dataset and record the result: "ready", "failed", or "skipped" when there is nothing to do."""
    with session_scope() as session:
        dataset = session.get(Dataset, dataset_id)
        if dataset is None or dataset.status != "processing":
            return "skipped"
        session.expunge(dataset)
    try:
        path = local_file(dataset)
        compressed = is_gzip(path)
        dataset.format = _format(dataset, path)
        parallel = dataset.kind == "parallel"
        stats = CorpusStats(("source", "target") if parallel else ("text",))
        report = ReportBuilder(
            dataset.source_language, dataset.target_language if parallel else None, monolingual=not parallel
        )
        with rows(dataset, path) as numbered:
            for row in numbered:
                stats.add(*row[1:])
                report.add(*row)
        if parallel:  # a second pass scores each pair against the associations learnt from the first's sample
            with rows(dataset, path) as numbered:
                for line, source, target in numbered:
                    report.rescan(line, source, target)
    except DataError as exc:
        log.info("dataset %s failed its checks: %s", dataset_id, exc)
        finish(dataset_id, status="failed", error=str(exc), error_line=exc.line)
        return "failed"
    except (UriError, ArtifactStoreError, OSError) as exc:
        log.error("dataset %s could not be read: %s", dataset_id, exc)
        finish(dataset_id, status="failed", error=f"the dataset's file could not be read: {exc}")
        return "failed"
    values: dict[str, Any] = {
        "status": "ready",
        "format": dataset.format,
        "compression": "gzip" if compressed else "none",
        "rows": stats.rows,
        "stats": stats.result(),
        "report": report.result(),
    }
    if dataset.source_uri:  # read in place: its size and hash are the object's as parsed
        values |= {"sha256": sha256_of(path), "size_bytes": path.stat().st_size}
    finish(dataset_id, **values)
    return "ready"
