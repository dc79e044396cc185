"""Translate a text file: POST /v1/models/{id}/translations (multipart), then poll it and download the result.

One segment a line; blank lines, line order and the spacing between sentences are kept (model/data/segments.py).
No per-request text limits beyond MAX_UPLOAD_MB: the work happens in the background on an inference worker.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, HTTPException, Request, Response, UploadFile, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import not_found, unprocessable
from app.api.models import owned_model
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import InferenceKey, ReadKey
from app.artifacts import ArtifactStoreError, get_store
from app.db import task_rows
from app.db.background_tables import FileTranslation
from app.db.base import new_id
from app.schemas.common import NUL_MESSAGE, Page, check_language, holds_nul
from app.schemas.file_translations import FileTranslationPublic
from app.schemas.inference import BACKEND_DESCRIPTION, BEAM_DESCRIPTION, Backend
from app.services import glossaries, inference_limits, target_languages
from app.services.file_translations import dispatch, source_key

router = APIRouter(prefix="/v1/models", tags=["file translations"])
FORM_FIELDS = {"file", "beam_size", "language", "backend", "glossary_id", "target_language", "source_language"}


def public(t: FileTranslation) -> FileTranslationPublic:
    done = t.status == task_rows.SUCCEEDED
    return FileTranslationPublic(
        id=t.id,
        model_id=t.model_id,
        filename=t.filename,
        status=t.status,  # type: ignore[arg-type]  # one of FileTranslationStatus, written by task_rows
        error=t.error,
        settings=t.settings,
        lines=t.lines,
        sentences=t.sentences,
        translated=t.translated,
        attempt=t.attempt,
        progress=1.0 if done else t.translated / t.sentences if t.sentences else 0.0,
        result_url=f"/v1/models/{t.model_id}/translations/{t.id}/result" if done else None,
        backend=t.backend,  # type: ignore[arg-type]  # one of AnsweringBackend, written by the worker
        target_language=t.target_language,
        zero_shot=t.zero_shot,
        created_at=t.created_at,
        started_at=t.started_at,
        finished_at=t.finished_at,
    )


def owned_translation(session: Session, model_id: str, translation_id: str, owner_id: str) -> FileTranslation:
    model = owned_model(session, model_id, owner_id)
    row = session.get(FileTranslation, translation_id)
    if row is None or row.model_id != model.id:
        raise not_found("translation", translation_id)
    return row


async def _known_form_fields(request: Request) -> None:
    unknown = sorted(set((await request.form()).keys()) - FORM_FIELDS)
    if unknown:
        raise unprocessable(unknown[0], f"unknown form field(s) {unknown}; expected {sorted(FORM_FIELDS)}")


@router.post(
    "/{model_id}/translations",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=FileTranslationPublic,
    responses={
        400: {"description": "Body is not multipart form data"},
        404: {"description": "Not found"},
        413: {"description": "Over MAX_UPLOAD_MB"},
        422: {
            "description": "Empty or not UTF-8 text, not a translation model, a beam over MAX_BEAM_SIZE, a model of "
            "several pairs without a target_language or with one it never saw"
        },
        503: {"description": "Artifact store or broker unavailable"},
    },
)
def translate_file(
    model_id: str,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    key: InferenceKey,
    _form: Annotated[None, Depends(_known_form_fields)],  # after the key: a refused key learns nothing of the form
    file: Annotated[UploadFile, File(description="UTF-8 text, one segment a line")],
    beam_size: Annotated[int | None, Form(ge=1, description=BEAM_DESCRIPTION)] = None,
    language: Annotated[
        str | None,
        Form(
            min_length=2,
            max_length=20,
            description="the source's, for sentence splitting (default source_language, else en)",
        ),
    ] = None,
    backend: Annotated[Backend, Form(description=BACKEND_DESCRIPTION)] = "auto",
    glossary_id: Annotated[
        str | None, Form(max_length=36, description="a glossary of yours whose terms the translation follows")
    ] = None,
    target_language: Annotated[
        str | None, Form(max_length=20, description="a model of several pairs: the language to translate into")
    ] = None,
    source_language: Annotated[
        str | None, Form(max_length=20, description="a model of several pairs: the file's language, for zero_shot")
    ] = None,
) -> FileTranslationPublic:
    """Translate a text file in the background: poll the answer's URL for progress, then GET its result_url."""
    if language is not None and holds_nul(language):  # a form field: app.schemas.common.Input does this for JSON
        raise unprocessable("language", f"language {NUL_MESSAGE}")
    for field, code in (("target_language", target_language), ("source_language", source_language)):
        try:
            check_language(code or "en")  # a form field: the check app.schemas.common.Language makes of JSON
        except ValueError as exc:
            raise unprocessable(field, str(exc)) from exc
    model = owned_model(session, model_id, key.owner_id)
    if model.objective != "translation":
        raise unprocessable("model_id", f"model {model_id} was trained for {model.objective}, not translation")
    beam_size = inference_limits.beam_size(settings, beam_size, model.beam_size)
    target = target_languages.for_model(model, target_language, source_language)
    if glossary_id:  # 422 for another's or a pair not the model's; the worker reads it when it starts
        glossaries.for_translation(session, key.owner_id, glossary_id, (model.source_language, model.target_language))
    data = file.file.read()  # bounded by the BodySizeLimit middleware (MAX_UPLOAD_MB)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise unprocessable(
            "file", f"the file is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
        ) from exc
    if not text.strip():
        raise unprocessable("file", "the file is empty")
    row = FileTranslation(
        id=new_id(),
        owner_id=key.owner_id,
        model_id=model.id,
        filename=(file.filename or "text.txt")[:255],
        settings={"beam_size": beam_size, "language": language or source_language or "en", "backend": backend}
        | ({"glossary_id": glossary_id} if glossary_id else {}),
        lines=text.count("\n") + (0 if text.endswith("\n") else 1),
        source_key="",
        target_language=target.tag,
        zero_shot=target.zero_shot,
    )
    row.source_key = source_key(model.id, row.id)
    store = get_store()
    try:  # the file first: a row never points at nothing
        store.write_bytes(row.source_key, text.encode("utf-8"))
    except ArtifactStoreError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "the artifact store is unavailable; try again", {"Retry-After": "5"}
        ) from exc
    try:
        session.add(row)
        details = {"model_id": model.id, "filename": row.filename, "lines": row.lines}
        audit.record(session, key, request, "translation.requested", "translation", row.id, details)
        session.commit()
    except BaseException:
        session.rollback()
        store.delete(row.source_key)
        raise
    try:
        dispatch(row.id)
    except Exception as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"translation {row.id} could not be queued: the broker is unavailable; ask again",
            headers={"Retry-After": "10"},
        ) from exc
    session.refresh(row)
    return public(row)


@router.get("/{model_id}/translations", response_model=Page[FileTranslationPublic], responses={404: {}})
def list_translations(
    model_id: str, session: SessionDep, key: ReadKey, limit: Limit = 50, offset: Offset = 0
) -> Page[FileTranslationPublic]:
    model = owned_model(session, model_id, key.owner_id)
    query = select(FileTranslation).where(FileTranslation.model_id == model.id)
    return paginate(session, query, (FileTranslation.created_at.desc(), FileTranslation.id), limit, offset, public)


@router.get("/{model_id}/translations/{translation_id}", response_model=FileTranslationPublic, responses={404: {}})
def read_translation(model_id: str, translation_id: str, session: SessionDep, key: ReadKey) -> FileTranslationPublic:
    return public(owned_translation(session, model_id, translation_id, key.owner_id))


@router.get(
    "/{model_id}/translations/{translation_id}/result",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "The translated file: the same lines, translated"},
        404: {"description": "Not found"},
        409: {"description": "Not succeeded (yet)"},
        503: {"description": "Artifact store unavailable"},
    },
)
def read_result(model_id: str, translation_id: str, session: SessionDep, key: ReadKey) -> Response:
    row = owned_translation(session, model_id, translation_id, key.owner_id)
    if row.status != task_rows.SUCCEEDED or row.result_key is None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"translation {translation_id} is {row.status}, not succeeded")
    try:
        data = get_store().read_bytes(row.result_key)
    except ArtifactStoreError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "the artifact store is unavailable; try again"
        ) from exc
    stem = row.filename.rsplit(".", 1)[0] or "text"
    return Response(
        data,
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{stem}.{row.model_id[:8]}.txt"'},
    )
