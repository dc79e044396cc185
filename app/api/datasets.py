"""Datasets: upload (validated line by line), list, read, delete."""

from __future__ import annotations

import hashlib
import logging
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, HTTPException, Request, Response, UploadFile, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api.deps import CurrentKey, SessionDep, SettingsDep
from app.api.errors import conflict, not_found, unprocessable
from app.api.pagination import Limit, Offset, paginate
from app.artifacts import ArtifactStoreError, get_store
from app.db.base import new_id
from app.db.job_rows import ACTIVE_STATES
from app.db.tables import Dataset, Job
from app.schemas.common import NUL_MESSAGE, Page, holds_nul
from app.schemas.datasets import DatasetKind, DatasetPublic
from model.data.corpus import DataError, dataset_stats, parse_monolingual_bytes, parse_parallel_bytes

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])
log = logging.getLogger(__name__)

EXTENSIONS = {"jsonl": "jsonl", "tsv": "tsv", "text": "txt"}
SUFFIX_FORMATS: dict[str, Literal["jsonl", "tsv"]] = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".tsv": "tsv",
    ".tab": "tsv",
}


def _parallel_format(filename: str, data: bytes) -> Literal["jsonl", "tsv"]:
    for suffix, fmt in SUFFIX_FORMATS.items():
        if filename.lower().endswith(suffix):
            return fmt
    first = next((line for line in data.lstrip(b"\xef\xbb\xbf").splitlines() if line.strip()), b"")
    return "jsonl" if first.lstrip().startswith(b"{") else "tsv"


async def _known_form_fields(request: Request) -> None:
    """Unknown form fields (`storage_key`, `owner`...) get 422, as unknown fields of a JSON body do."""
    unknown = sorted(set((await request.form()).keys()) - {"file", "name", "kind"})
    if unknown:
        raise unprocessable(
            unknown[0], f"unknown form field(s) {', '.join(map(repr, unknown))}; expected file, name and kind"
        )


def _owned(session: Session, dataset_id: str, owner_id: str) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or dataset.owner_id != owner_id:
        raise not_found("dataset", dataset_id)
    return dataset


@router.post(
    "",
    response_model=DatasetPublic,
    status_code=status.HTTP_201_CREATED,
    dependencies=[Depends(_known_form_fields)],
    responses={
        400: {"description": "Body is not multipart form data"},
        413: {"description": "File too large"},
        422: {"description": "Invalid file"},
        503: {"description": "Artifact store unavailable"},
    },
)
def upload_dataset(
    session: SessionDep,
    settings: SettingsDep,
    key: CurrentKey,
    file: Annotated[
        UploadFile, File(description="JSONL {source,target}, TSV source<TAB>target, or text (one sentence a line)")
    ],
    name: Annotated[str, Form(min_length=1, max_length=200)],
    kind: Annotated[DatasetKind, Form()],
) -> DatasetPublic:
    if holds_nul(name):  # a form field: app.schemas.common.Input does this for JSON bodies
        raise unprocessable("name", f"name {NUL_MESSAGE}")
    data = file.file.read()  # the body size was already bounded by the BodySizeLimit middleware
    if not data.strip():
        raise unprocessable("file", "the file is empty")
    fmt: Literal["jsonl", "tsv", "text"]
    rows: list[tuple[str, str]] | list[str]
    try:
        if kind == "parallel":
            fmt = _parallel_format(file.filename or "", data)
            rows = parse_parallel_bytes(data, fmt)
        else:
            fmt = "text"
            rows = parse_monolingual_bytes(data)
    except DataError as exc:
        raise unprocessable("file", str(exc)) from exc
    dataset = Dataset(
        id=new_id(),
        owner_id=key.owner_id,
        name=name,
        kind=kind,
        format=fmt,
        rows=len(rows),
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        stats=dataset_stats(rows),
        storage_key="",
    )
    dataset.storage_key = f"datasets/{dataset.id}/data.{EXTENSIONS[fmt]}"
    store = get_store()
    try:  # the file first, whole or not at all: a row never points at nothing
        store.write_bytes(dataset.storage_key, data)
    except ArtifactStoreError as exc:
        log.error("dataset upload: %s", exc)
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the artifact store is unavailable; try again",
            headers={"Retry-After": "5"},
        ) from exc
    try:
        session.add(dataset)
        session.commit()
    except BaseException:
        session.rollback()
        store.delete(f"datasets/{dataset.id}")
        raise
    return DatasetPublic.model_validate(dataset)


@router.get("", response_model=Page[DatasetPublic])
def list_datasets(session: SessionDep, key: CurrentKey, limit: Limit = 50, offset: Offset = 0) -> Page[DatasetPublic]:
    return paginate(
        session,
        select(Dataset).where(Dataset.owner_id == key.owner_id),
        (Dataset.created_at.desc(), Dataset.id),
        limit,
        offset,
        DatasetPublic.model_validate,
    )


@router.get("/{dataset_id}", response_model=DatasetPublic, responses={404: {"description": "Not found"}})
def read_dataset(dataset_id: str, session: SessionDep, key: CurrentKey) -> DatasetPublic:
    return DatasetPublic.model_validate(_owned(session, dataset_id, key.owner_id))


@router.delete(
    "/{dataset_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: {"description": "Not found"}, 409: {"description": "In use by a job"}},
)
def delete_dataset(dataset_id: str, session: SessionDep, key: CurrentKey) -> Response:
    dataset = _owned(session, dataset_id, key.owner_id)
    users = session.scalars(
        select(Job.id).where(
            (Job.dataset_id == dataset_id) | (Job.valid_dataset_id == dataset_id), Job.status.in_(ACTIVE_STATES)
        )
    ).all()
    if users:
        raise conflict(f"dataset {dataset_id} is used by active job(s) {', '.join(users)}; cancel them or wait")
    storage_key = dataset.storage_key
    session.delete(dataset)
    session.commit()
    try:
        get_store().delete(storage_key.rsplit("/", 1)[0])
    except ArtifactStoreError as exc:  # the row is gone; its file stays behind until the store is back
        log.error("dataset %s deleted, its files not: %s", dataset_id, exc)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
