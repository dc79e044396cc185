"""POST /v1/models/import: a model archive (this service's native export) becomes one of the caller's models.

The upload is stored under a staging key, then an inference worker unpacks, checks and loads it and writes the
model (worker/tasks/model_import.py). An archive it refuses is a 422 naming why, with nothing left behind. A
worker slower than EXPORT_TIMEOUT_SECONDS gets 202 with the model's URL: it appears there when done. The staging
key is imports/<model id>.tar.gz: the workers' reaper removes one whose message expired unread.
"""

from __future__ import annotations

import lzma
import tarfile
import zlib
from typing import Annotated, Any, BinaryIO

from fastapi import APIRouter, Depends, File, HTTPException, Request, UploadFile, status
from fastapi.responses import JSONResponse

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import unprocessable
from app.api.models import owned_model
from app.api.scopes import ModelsWriteKey
from app.artifacts import ArtifactStoreError, get_store
from app.core.task_names import IMPORT
from app.db.base import new_id
from app.schemas.models import ModelPublic
from app.services import inference_client, quotas
from app.services.errors import ServiceError, WorkerTimeout
from model.io.archive_stream import ArchiveError, open_tar, stream_limit

router = APIRouter(prefix="/v1/models", tags=["models"])


def _is_tar(stream: BinaryIO) -> bool:
    """Whether the file's first member reads as a tar archive (gzip, bzip2, xz or none); the stream is rewound. Only
    the first header is read, through a bounded reader: an extended header of gigabytes is not."""
    try:
        with open_tar(stream, stream_limit(0, 1)) as tar:
            return tar.next() is not None  # the first member, read as the archive was opened
    except (ArchiveError, tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError):
        return False
    finally:
        stream.seek(0)


async def _only_the_file(request: Request) -> None:
    """Unknown form fields (`storage_key`, `owner`...) get 422, as unknown fields of a JSON body do."""
    unknown = sorted(set((await request.form()).keys()) - {"file"})
    if unknown:
        raise unprocessable(unknown[0], f"unknown form field(s) {unknown}; expected only file")


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelPublic,
    responses={
        202: {"description": "Still being imported: GET the Location shortly"},
        400: {"description": "Body is not multipart form data"},
        413: {"description": "Over MAX_DATASET_MB, or over the organisation's storage quota"},
        422: {"description": "Not an importable archive; the detail says why"},
        503: {"description": "Artifact store or broker unavailable"},
        504: {"description": "No inference worker answered"},
    },
)
def import_model(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    key: ModelsWriteKey,
    _form: Annotated[None, Depends(_only_the_file)],  # after the key: a refused key learns nothing of the form
    file: Annotated[UploadFile, File(description="a .tar.gz from GET /v1/models/{id}/export?format=native")],
) -> Any:
    # The body, bounded by the BodySizeLimit middleware (MAX_DATASET_MB), was spooled to a temporary file by the
    # form parser: it goes to the store a chunk at a time, never whole in memory (an OPUS-MT archive is ~300 MB).
    if file.size == 0:
        raise unprocessable("file", "the file is empty")
    # refused early by the archive's size; the worker charges the model at the size it stores it (413 then too)
    quotas.check_storage(session, settings, key.owner_id, file.size or 0)
    if not _is_tar(file.file):  # the worker checks every member; this spares it (and the caller's wait) the obvious
        raise unprocessable("file", f"{file.filename}: not a readable .tar.gz archive")
    model_id = new_id()
    staging = f"imports/{model_id}.tar.gz"
    try:
        get_store().write_stream(staging, file.file)
    except ArtifactStoreError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "the artifact store is unavailable; try again", {"Retry-After": "5"}
        ) from exc
    session.close()  # no connection held while a worker imports
    filename = file.filename or "upload.tar.gz"
    try:
        inference_client.call(
            settings, IMPORT, [staging, model_id, key.owner_id, filename], timeout=settings.export_timeout_seconds
        )
    except WorkerTimeout:
        details = {"filename": filename, "status": "importing"}
        audit.record(session, key, request, "model.import_requested", "model", model_id, details)
        session.commit()
        # Queued but not answered: a worker may still import it (and deletes the upload either way), or the
        # message expires unread and the model never appears (a later upload is a new import); the workers' reaper
        # then removes the upload (worker/reaper.py: staged uploads older than this expiry and an import's run).
        return JSONResponse(
            {
                "detail": f"model {model_id} is being imported; GET /v1/models/{model_id} shortly (404 after a few "
                "minutes: no worker took it, upload it again)",
                "id": model_id,
            },
            status.HTTP_202_ACCEPTED,
            headers={"Location": f"/v1/models/{model_id}", "Retry-After": "10"},
        )
    except ServiceError as exc:
        if exc.status == status.HTTP_422_UNPROCESSABLE_CONTENT:  # the worker refused the archive, saying why
            raise unprocessable("file", str(exc.detail)) from exc
        get_store().delete(staging)
        raise
    # The worker created the model in its own transaction: the audit row follows it, once the import succeeded.
    model = owned_model(session, model_id, key.owner_id)
    audit.record(session, key, request, "model.imported", "model", model.id, {"filename": filename, "name": model.name})
    session.commit()
    return ModelPublic.model_validate(model)
