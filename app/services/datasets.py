"""A dataset's life before training: stored (uploaded as a stream, or registered from an object-store URI read in
place), then parsed, checked and reported on by a worker (worker/data/ingest.py): processing -> ready | failed.

Nothing here holds a corpus in memory: an upload goes from the form parser's spooled file to the artifact store a
chunk at a time, hashed on the way (a 1.5 GB corpus included).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any, BinaryIO

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.artifacts import ArtifactStoreError, get_store
from app.core.settings import Settings
from app.core.task_names import DATA_QUEUE, FILTER_DATASET, PROCESS_DATASET
from app.db.access_tables import Owner
from app.db.base import new_id, utcnow
from app.db.session import session_scope
from app.db.tables import Dataset
from app.schemas.datasets import DatasetFilter, DatasetRegister
from app.services import dataset_uris
from app.services.errors import Conflict, InvalidField, NotFound, ServiceUnavailable
from app.services.queueing import get_sender
from model.data.corpus import GZIP_MAGIC

log = logging.getLogger(__name__)

EXTENSIONS = {"jsonl": "jsonl", "tsv": "tsv", "text": "txt", "auto": "data"}
SUFFIX_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".tsv": "tsv", ".tab": "tsv"}
STORE_RETRY_AFTER = 5


class Hashing:
    """A readable that hashes (sha256) and counts what is read through it."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream, self.size, self.sha256 = stream, 0, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size)
        self.size += len(chunk)
        self.sha256.update(chunk)
        return chunk


def format_from_name(filename: str, kind: str, given: str = "auto") -> str:
    """The stored format: text for monolingual data; else as given, or by the file's suffix (before any .gz), or
    auto (the worker decides by the first line)."""
    if kind == "monolingual":
        return "text"
    if given != "auto":
        return given
    name = filename.lower().removesuffix(".gz")
    return next((fmt for suffix, fmt in SUFFIX_FORMATS.items() if name.endswith(suffix)), "auto")


def _peek_gzip(stream: BinaryIO) -> tuple[bool, bool]:
    """(empty, gzip-compressed) by the first bytes; the stream is rewound."""
    head = stream.read(2)
    stream.seek(0)
    return not head, head == GZIP_MAGIC


def create_upload(
    session: Session,
    owner_id: str,
    name: str,
    kind: str,
    filename: str,
    stream: BinaryIO,
    fmt: str = "auto",
    source_language: str | None = None,
    target_language: str | None = None,
    check_size: Callable[[int], None] | None = None,
    lineage: dict[str, Any] | None = None,
) -> Dataset:
    """Store an uploaded file (seekable: the form parser's spooled file) a chunk at a time, then its row
    (`processing`), then queue its parsing. The file first, whole or not at all: a row never points at nothing.
    `check_size(bytes stored)` may refuse the file once stored (a quota): it is deleted, and no row is made.
    `lineage`: where a file the service wrote came from (app/services/corrections.py)."""
    empty, compressed = _peek_gzip(stream)
    if empty:
        raise InvalidField("file", "the file is empty")
    dataset = Dataset(
        id=new_id(),
        owner_id=owner_id,
        name=name,
        kind=kind,
        format=format_from_name(filename, kind, fmt),
        compression="gzip" if compressed else "none",
        rows=0,
        size_bytes=0,
        sha256="",
        stats={},
        status="processing",
        source_language=source_language,
        target_language=target_language,
        storage_key="",
        lineage=lineage,
    )
    dataset.storage_key = f"datasets/{dataset.id}/data.{EXTENSIONS[dataset.format]}" + (".gz" if compressed else "")
    hashing = Hashing(stream)
    store = get_store()
    try:
        store.write_stream(dataset.storage_key, hashing)  # type: ignore[arg-type]  # a readable is all it needs
    except ArtifactStoreError as exc:
        log.error("dataset upload: %s", exc)
        store_delete(dataset.storage_key)
        raise ServiceUnavailable("the artifact store is unavailable; try again", STORE_RETRY_AFTER) from exc
    dataset.size_bytes, dataset.sha256 = hashing.size, hashing.sha256.hexdigest()
    try:
        if check_size is not None:
            check_size(dataset.size_bytes)
        session.add(dataset)
        session.commit()
    except BaseException:
        session.rollback()
        store_delete(f"datasets/{dataset.id}")
        raise
    dispatch(dataset.id)
    return dataset


def register_uri(session: Session, settings: Settings, owner_id: str, body: DatasetRegister) -> Dataset:
    """A dataset read in place from an object-store URI: the service must be allowed to (under DATASET_URI_PREFIXES
    and the organisation's own list, app/services/dataset_uris.py) and able to (a HEAD with its credentials) read it;
    a worker then parses it from there."""
    from app.artifacts.uri import UriError, head_uri  # boto3 loads only where a URI is registered

    owner = session.get(Owner, owner_id)
    assert owner is not None  # the caller's key belongs to it
    dataset_uris.check_readable(settings, owner, body.uri)
    try:
        size = head_uri(settings, body.uri)
    except UriError as exc:
        raise InvalidField("uri", str(exc)) from exc
    if size == 0:
        raise InvalidField("uri", f"{body.uri} is empty")
    dataset = Dataset(
        id=new_id(),
        owner_id=owner_id,
        name=body.name,
        kind=body.kind,
        format=format_from_name(body.uri, body.kind, body.format),
        compression="none",  # the worker reads the first bytes
        rows=0,
        size_bytes=size,
        sha256="",
        stats={},
        status="processing",
        source_uri=body.uri,
        source_language=body.source_language,
        target_language=body.target_language,
        storage_key="",
    )
    session.add(dataset)
    session.commit()
    dispatch(dataset.id)
    return dataset


def create_filtered(session: Session, parent: Dataset, body: DatasetFilter) -> Dataset:
    """A new dataset of the parent's rows that the rules keep, made by a worker (worker/data/filtering.py), which
    records what each rule removed; it is `processing` until then, and `failed` if the rules leave nothing."""
    dataset = new_filtered(session, parent, body)
    session.add(dataset)
    session.commit()
    dispatch(dataset.id, FILTER_DATASET)
    return dataset


def new_filtered(session: Session, parent: Dataset, body: DatasetFilter) -> Dataset:
    """The filtered dataset's row (`processing`), checked, not yet added to the session: the caller commits it, then
    sends FILTER_DATASET. The parent is held until then, as a job holds its datasets (app/services/deletion.py)."""
    locked = session.get(Dataset, parent.id, with_for_update={"read": True}, populate_existing=True)
    if locked is None:
        raise NotFound("dataset", parent.id)
    require_ready(parent, "dataset")
    if parent.kind != "parallel":
        raise InvalidField("dataset", f"dataset {parent.id} is {parent.kind}: the rules filter parallel datasets")
    rules = body.rules
    if rules.drop_wrong_language and not (parent.source_language or parent.target_language):
        raise InvalidField(
            "rules.drop_wrong_language",
            f"dataset {parent.id} declares no language (source_language, target_language at upload): there is no "
            "wrong language to drop",
        )
    dataset = Dataset(
        id=new_id(),
        owner_id=parent.owner_id,
        name=body.name or f"{parent.name} (filtered)"[:200],
        kind=parent.kind,
        format="jsonl",
        compression="gzip",
        rows=0,
        size_bytes=0,
        sha256="",
        stats={},
        status="processing",
        source_language=parent.source_language,
        target_language=parent.target_language,
        parent_id=parent.id,
        filter_rules=rules.model_dump(exclude_defaults=True),
        storage_key="",
    )
    dataset.storage_key = f"datasets/{dataset.id}/data.jsonl.gz"
    return dataset


def dispatch(dataset_id: str, task: str = PROCESS_DATASET) -> None:
    """Queue the dataset's parsing (or making, for a filtered one). With the broker away the dataset fails saying
    so (upload it again), and the caller answers 503."""
    try:
        get_sender().send_task(task, args=[dataset_id], queue=DATA_QUEUE)
    except Exception as exc:
        with session_scope() as session:
            session.execute(
                update(Dataset)
                .where(Dataset.id == dataset_id, Dataset.status == "processing")
                .values(
                    status="failed",
                    error=f"the broker is unavailable ({type(exc).__name__}); upload it again",
                    processed_at=utcnow(),
                )
            )
        raise ServiceUnavailable("the broker is unavailable; upload the dataset again", STORE_RETRY_AFTER) from exc


def refuse_failed(dataset: Dataset, field: str) -> None:
    """A dataset that failed its checks cannot be used: 422 naming why. (One still processing can: a job waits for
    it, worker/tasks/training.py.)"""
    if dataset.status == "failed":
        raise InvalidField(field, f"dataset {dataset.id} failed its checks and cannot be used: {dataset.error}")


def require_ready(dataset: Dataset, field: str) -> None:
    """What cannot wait (an evaluation) needs a parsed dataset: 409 while it is processing, 422 when it failed."""
    refuse_failed(dataset, field)
    if dataset.status == "processing":
        raise Conflict(
            f"dataset {dataset.id} ({field}) is still being processed (parsed and checked by a worker); ask "
            f"again when GET /v1/datasets/{dataset.id} says ready"
        )


def store_delete(key: str) -> None:
    try:
        get_store().delete(key)
    except ArtifactStoreError as exc:  # what is left behind is named, and harmless: no row points at it
        log.error("could not delete %s from the artifact store: %s", key, exc)
