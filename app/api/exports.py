"""Download a trained model: GET /v1/models/{id}/export streams a .tar.gz in one of three formats, with its model
card (GET /v1/models/{id}/card) as README.md.

The first request for a format has an inference worker build it (worker/tasks/export.py) into the artifact
store; every later one streams the stored file. A build that outlasts EXPORT_TIMEOUT_SECONDS answers 202 with
Retry-After: the worker finishes it, and the retry downloads it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response

from app.api.deps import SessionDep, SettingsDep
from app.api.models import owned_model
from app.api.scopes import ReadKey
from app.artifacts import ArtifactStoreError, get_store
from app.core.task_names import EXPORT
from app.services import inference_client
from app.services.card_facts import card_facts
from app.services.errors import WorkerTimeout
from app.services.exports import Ct2Quantization, ExportFormat, export_key, export_name
from app.services.model_card import card_digest, render_card

router = APIRouter(prefix="/v1/models", tags=["models"])

RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/gzip": {}}, "description": "The archive: one folder named like the file"},
    202: {"description": "Being built: retry after Retry-After seconds"},
    404: {"description": "Not found"},
    422: {"description": "Unknown format, a quantization on a format other than ctranslate2, or not exportable"},
    503: {"description": "Artifact store, broker or the model's files unavailable"},
}


@router.get("/{model_id}/export", response_class=FileResponse, responses=RESPONSES)
def export_model(
    model_id: str,
    session: SessionDep,
    settings: SettingsDep,
    key: ReadKey,
    fmt: Annotated[ExportFormat, Query(alias="format", description="native, huggingface or ctranslate2")] = "native",
    quantization: Annotated[
        Ct2Quantization | None, Query(description="ctranslate2 only: e.g. int8; none keeps float32")
    ] = None,
) -> Response:
    """The model as a .tar.gz, its model card as the folder's README.md: `native` (what this service imports
    back), `huggingface` (MarianMTModel and AutoTokenizer from_pretrained load the folder) or `ctranslate2`
    (ctranslate2.Translator loads it)."""
    row = owned_model(session, model_id, key.owner_id)  # 404 first: nothing said about others' models
    if quantization is not None and fmt != "ctranslate2":
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [
                {
                    "loc": ["query", "quantization"],
                    "msg": f"quantization={quantization!r} applies to format=ctranslate2 only, not {fmt!r}",
                    "type": "value_error",
                }
            ],
        )
    card = render_card(card_facts(session, row), fmt, export_name(row.id, fmt, quantization))
    stored = export_key(row.id, row.sha256, fmt, quantization, card_digest(card))
    session.close()  # do not hold a connection while a worker builds the export
    store = get_store()
    try:
        if not store.exists(stored):
            try:
                answer, _ = inference_client.call(
                    settings, EXPORT, [row.id, fmt, quantization, card], timeout=settings.export_timeout_seconds
                )
            except WorkerTimeout:
                return JSONResponse(
                    {"detail": f"the {fmt} export of model {model_id} is being built; retry shortly"},
                    status.HTTP_202_ACCEPTED,
                    headers={"Retry-After": "10"},
                )
            stored = answer["key"]
        path = store.fetch(stored)
    except ArtifactStoreError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"the artifact store is unavailable ({type(exc).__name__}); try again",
            headers={"Retry-After": "10"},
        ) from exc
    return FileResponse(
        path, media_type="application/gzip", filename=f"{export_name(row.id, fmt, quantization)}.tar.gz"
    )


@router.get(
    "/{model_id}/card",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/markdown": {}}, "description": "README.md"}, 404: {"description": "Not found"}},
)
def model_card(
    model_id: str,
    session: SessionDep,
    key: ReadKey,
    fmt: Annotated[ExportFormat, Query(alias="format", description="the export it is for")] = "native",
) -> PlainTextResponse:
    """The model card its `format` export carries as README.md (Hugging Face layout): languages, licence, the data
    it was trained on with their sha256, settings, training time and device, validation metrics, test-set scores
    with their sacrebleu signatures, and the model it started from, as they stand now."""
    row = owned_model(session, model_id, key.owner_id)
    card = render_card(card_facts(session, row), fmt, export_name(row.id, fmt, None))
    return PlainTextResponse(card, media_type="text/markdown; charset=utf-8")
