"""Make a filtered dataset: the parent's rows that its rules keep (model/data/filters.py), streamed into a gzip
JSONL file in the artifact store, with how many rows each rule removed; then parsed and reported on like an upload
(worker/data/ingest.py). Its file is charged to the organisation's storage quota as stored: one that would pass it
fails the dataset naming the limit, and is deleted. A redelivered task finds the dataset no longer processing and
does nothing; one that died half-way is redelivered and writes the file again from the parent, which never changed;
one deleted while being made deletes the file it wrote.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from app.artifacts import ArtifactStoreError, get_store
from app.artifacts.uri import UriError
from app.core.settings import get_settings
from app.db.session import session_scope
from app.db.tables import Dataset
from app.services import quotas
from app.services.errors import PayloadTooLarge
from model.data.alignment import fit_alignment
from model.data.corpus import DataError
from model.data.filters import FilterRules, apply_filters
from worker.data import ingest
from worker.data.source import rows

log = logging.getLogger(__name__)


def rules_of(stored: dict[str, Any]) -> FilterRules:
    """The stored rules (the API's FilterRules, set fields only) as the filters take them."""
    known = {f.name for f in dataclasses.fields(FilterRules)}
    return FilterRules(**{k: v for k, v in stored.items() if k in known and v is not None})


def _write(parent: Dataset, rules: FilterRules, path: Path) -> dict[str, Any]:
    """The kept rows into `path` (gzip JSONL); the counts of what each rule removed."""
    alignment = None
    if rules.drop_misaligned:  # a first pass: the lexical model is learnt from a sample of the parent's pairs
        with rows(parent) as numbered:
            alignment = fit_alignment(numbered)
    with rows(parent) as numbered, gzip.open(path, "wt", encoding="utf-8", compresslevel=5) as out:
        kept, counts = apply_filters(
            numbered, rules, parent.source_language, parent.target_language, alignment=alignment
        )
        for _line, source, target in kept:
            out.write(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n")
    return counts.as_dict()


def make(dataset_id: str) -> str:
    """Write the filtered dataset and parse it: "ready", "failed", or "skipped" when there is nothing to do."""
    with session_scope() as session:
        dataset = session.get(Dataset, dataset_id)
        if dataset is None or dataset.status != "processing":
            return "skipped"
        parent = session.get(Dataset, dataset.parent_id) if dataset.parent_id else None
        session.expunge_all()
    if parent is None or parent.status != "ready":
        ingest.finish(dataset_id, status="failed", error=f"its parent dataset {dataset.parent_id} is gone")
        return "failed"
    scratch = get_settings().data_dir / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        path = Path(tmp) / "data.jsonl.gz"
        try:
            counts = _write(parent, rules_of(dataset.filter_rules or {}), path)
        except (DataError, ValueError, UriError, ArtifactStoreError, OSError) as exc:
            log.error("filtered dataset %s could not be made: %s", dataset_id, exc)
            ingest.finish(dataset_id, status="failed", error=f"filtering dataset {parent.id} failed: {exc}")
            return "failed"
        if counts["kept"] == 0:
            removed = ", ".join(f"{rule} {n:,}" for rule, n in counts["removed"].items())
            ingest.finish(
                dataset_id,
                status="failed",
                filter_counts=counts,
                error=f"the rules removed all {counts['total']:,} rows ({removed}): nothing is left to train on",
            )
            return "failed"
        digest = ingest.sha256_of(path)
        try:
            get_store().push(path, dataset.storage_key)
        except ArtifactStoreError as exc:
            ingest.finish(dataset_id, status="failed", error=f"the artifact store refused the file: {exc}")
            return "failed"
        size = path.stat().st_size
    try:
        with session_scope() as session:
            row = session.get(Dataset, dataset_id)
            if row is None:  # deleted while it was being made: its tombstone may be collected already
                log.info("filtered dataset %s was deleted while being made; its file goes too", dataset_id)
                get_store().delete(f"datasets/{dataset_id}")
                return "skipped"
            if row.status != "processing":
                return "skipped"
            # charged as stored, under the organisation's lock until this commits (app/services/quotas.py)
            quotas.reserve_storage(session, get_settings(), row.owner_id, size)
            row.filter_counts, row.sha256, row.size_bytes = counts, digest, size
    except PayloadTooLarge as exc:
        get_store().delete(dataset.storage_key)
        ingest.finish(dataset_id, status="failed", filter_counts=counts, error=str(exc.detail))
        return "failed"
    return ingest.process(dataset_id)
