"""Datasets: upload (streamed to the store, parsed by a worker), register from a URI, list, read, report, delete."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, Response, UploadFile, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import not_found, unprocessable
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import ReadKey, TrainKey
from app.db.tables import Dataset
from app.schemas.common import NUL_MESSAGE, Page, check_language, holds_nul
from app.schemas.datasets import DatasetFilter, DatasetKind, DatasetPublic, DatasetRegister
from app.services import datasets, deletion, quotas

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

FORM_FIELDS = {"file", "name", "kind", "format", "source_language", "target_language"}


async def _known_form_fields(request: Request) -> None:
    """Unknown form fields (`storage_key`, `owner`...) get 422, as unknown fields of a JSON body do."""
    unknown = sorted(set((await request.form()).keys()) - FORM_FIELDS)
    if unknown:
        raise unprocessable(
            unknown[0],
            f"unknown form field(s) {', '.join(map(repr, unknown))}; expected {', '.join(sorted(FORM_FIELDS))}",
        )


def _language(field: str, value: str | None) -> str | None:
    if value is None or value == "":
        return None
    try:
        return check_language(value)
    except ValueError as exc:
        raise unprocessable(field, str(exc)) from exc


def _owned(session: Session, dataset_id: str, owner_id: str) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or dataset.owner_id != owner_id:
        raise not_found("dataset", dataset_id)
    return dataset


@router.post(
    "",
    response_model=DatasetPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        400: {"description": "Body is not multipart form data"},
        413: {"description": "Over MAX_DATASET_MB, or over the organisation's storage quota"},
        422: {"description": "Empty file or a bad field"},
        503: {"description": "Artifact store or broker unavailable"},
    },
)
def upload_dataset(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    key: TrainKey,
    _form: Annotated[None, Depends(_known_form_fields)],  # after the key: a refused key learns nothing of the form
    file: Annotated[
        UploadFile,
        File(description="JSONL {source,target}, TSV source<TAB>target, or text (one sentence a line); gzip allowed"),
    ],
    name: Annotated[str, Form(min_length=1, max_length=200)],
    kind: Annotated[DatasetKind, Form()],
    format: Annotated[Literal["auto", "jsonl", "tsv"], Form(description="auto: by the suffix, else the first line")] = (
        "auto"
    ),
    source_language: Annotated[str | None, Form(description="the sources' language (BCP 47), for the report")] = None,
    target_language: Annotated[str | None, Form(description="the targets' language (BCP 47), for the report")] = None,
) -> DatasetPublic:
    """Store the file (streamed to the artifact store, never held in memory) and answer 201 with the dataset
    `processing`: a worker parses and checks every line and writes the data report, then it is `ready`, or `failed`
    naming the first bad line. Jobs wait for `ready`."""
    if holds_nul(name):  # a form field: app.schemas.common.Input does this for JSON bodies
        raise unprocessable("name", f"name {NUL_MESSAGE}")
    if file.size is not None:  # the form parser spooled it: refused before anything is stored
        quotas.check_storage(session, settings, key.owner_id, file.size)
    details = {"name": name, "kind": kind, "filename": file.filename or ""}
    audit.record(session, key, request, "dataset.uploaded", "dataset", Dataset, details)
    dataset = datasets.create_upload(
        session,
        key.owner_id,
        name,
        kind,
        file.filename or "",
        file.file,
        format,
        _language("source_language", source_language),
        _language("target_language", target_language),
        # checked again once stored, under the organisation's lock until the row commits: concurrent uploads take turns
        check_size=partial(quotas.reserve_storage, session, settings, key.owner_id),
    )
    return DatasetPublic.model_validate(dataset)


@router.post(
    "/register",
    response_model=DatasetPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        400: {"description": "Body is not UTF-8 JSON"},
        422: {"description": "A URI the service may not or cannot read"},
        503: {"description": "Broker down"},
    },
)
def register_dataset(
    body: DatasetRegister, session: SessionDep, settings: SettingsDep, key: TrainKey, request: Request
) -> DatasetPublic:
    """A dataset read in place from an object-store URI (`s3://bucket/key`, under DATASET_URI_PREFIXES and the
    organisation's own list, GET /v1/organisation/dataset-uri-prefixes), never copied through the API: a worker
    parses it from there, as after an upload."""
    details = {"name": body.name, "uri": body.uri}
    audit.record(session, key, request, "dataset.registered", "dataset", Dataset, details)
    return DatasetPublic.model_validate(datasets.register_uri(session, settings, key.owner_id, body))


@router.get("", response_model=Page[DatasetPublic])
def list_datasets(
    session: SessionDep,
    key: ReadKey,
    parent_id: Annotated[str | None, Query(max_length=36, description="the datasets filtered from this one")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[DatasetPublic]:
    query = select(Dataset).where(Dataset.owner_id == key.owner_id)
    if parent_id:
        query = query.where(Dataset.parent_id == parent_id)
    return paginate(
        session,
        query,
        (Dataset.created_at.desc(), Dataset.id),
        limit,
        offset,
        DatasetPublic.model_validate,
    )


@router.get("/{dataset_id}", response_model=DatasetPublic, responses={404: {"description": "Not found"}})
def read_dataset(dataset_id: str, session: SessionDep, key: ReadKey) -> DatasetPublic:
    return DatasetPublic.model_validate(_owned(session, dataset_id, key.owner_id))


@router.get(
    "/{dataset_id}/report",
    responses={
        404: {"description": "No such dataset"},
        409: {"description": "The dataset has no report: it is still being processed, or it failed"},
    },
)
def read_report(dataset_id: str, session: SessionDep, key: ReadKey) -> dict[str, Any]:
    """The data report a worker wrote when it parsed the dataset (docs/data.md). Until then there is none: 409
    saying whether the dataset is still being processed or failed (and why); 404 is for a dataset that does not
    exist (a client that just created one must not read it as gone, as POST /filter's 409 says the same)."""
    dataset = _owned(session, dataset_id, key.owner_id)
    if dataset.status != "ready" or dataset.report is None:
        reason = f"it failed: {dataset.error}" if dataset.status == "failed" else "it is still being processed"
        raise HTTPException(status.HTTP_409_CONFLICT, f"dataset {dataset_id} has no report: {reason}")
    return dataset.report


@router.post(
    "/{dataset_id}/filter",
    response_model=DatasetPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        400: {"description": "Body is not UTF-8 JSON"},
        404: {"description": "Not found"},
        409: {"description": "The dataset is still being processed"},
        413: {"description": "Nothing is left of the organisation's storage quota"},
        422: {"description": "Bad rules, a failed or monolingual dataset"},
    },
)
def filter_dataset(
    dataset_id: str, body: DatasetFilter, session: SessionDep, settings: SettingsDep, key: TrainKey, request: Request
) -> DatasetPublic:
    """A new dataset of the rows the rules keep (its `parent_id` and `filter_rules` say how it was made): a worker
    writes it and records in `filter_counts` how many rows each rule removed; `failed` if nothing is left, or if its
    file would take the organisation past its storage quota (413 at once when nothing is left of it)."""
    parent = _owned(session, dataset_id, key.owner_id)
    quotas.check_room(session, settings, key.owner_id, f"a dataset filtered from {parent.id}")
    details = {"parent_id": parent.id, "rules": body.model_dump(mode="json", exclude_unset=True)}
    audit.record(session, key, request, "dataset.filtered", "dataset", Dataset, details)
    return DatasetPublic.model_validate(datasets.create_filtered(session, parent, body))


@router.delete(
    "/{dataset_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        404: {"description": "Not found"},
        409: {
            "description": "In use: by an active job, a queued or running evaluation or translation, a dataset "
            "being filtered from it, or a running sweep"
        },
    },
)
def delete_dataset(dataset_id: str, session: SessionDep, key: TrainKey, request: Request) -> Response:
    """Delete the dataset; its file stays ARTIFACT_GRACE_SECONDS, then the collector deletes it."""
    dataset = _owned(session, dataset_id, key.owner_id)
    name = dataset.name
    deletion.delete_dataset(session, dataset)
    audit.record(session, key, request, "dataset.deleted", "dataset", dataset_id, {"name": name})
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
