"""Translate a dataset with a model into a new parallel dataset: POST /v1/models/{id}/dataset-translations, then poll
it (progress, rate, ETA) until its `output_dataset_id` names the new dataset; DELETE stops and removes one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api import audit
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import not_found
from app.api.models import owned_model
from app.api.pagination import Limit, Offset, paginate
from app.api.scopes import ReadKey, TrainKey
from app.db import task_rows, tombstone_rows
from app.db.base import utcnow
from app.db.dataset_translation_tables import DatasetTranslation
from app.schemas.common import Page
from app.schemas.dataset_translations import DatasetTranslationCreate, DatasetTranslationPublic
from app.services import quotas
from app.services.dataset_translations import create, dispatch, parts_prefix

router = APIRouter(prefix="/v1/models", tags=["dataset translations"])


def _rate(t: DatasetTranslation, now: datetime) -> float | None:
    """Rows a second of the running attempt: those it translated over the time since it started."""
    if t.status != task_rows.RUNNING or t.started_at is None:
        return None
    seconds = (now - t.started_at).total_seconds()
    done = t.translated - t.resumed_from
    return round(done / seconds, 3) if done > 0 and seconds > 0 else None


def public(t: DatasetTranslation) -> DatasetTranslationPublic:
    done = t.status == task_rows.SUCCEEDED
    rate = _rate(t, utcnow())
    settings = {k: v for k, v in t.settings.items() if k not in ("counts", "reference_scores")}
    return DatasetTranslationPublic(
        id=t.id,
        model_id=t.model_id,
        dataset_id=t.dataset_id,
        output_dataset_id=t.output_dataset_id if done else None,
        status=t.status,  # type: ignore[arg-type]  # one of DatasetTranslationStatus, written by task_rows
        error=t.error,
        settings=settings,
        sentences=t.sentences,
        translated=t.translated,
        resumed_from=t.resumed_from,
        attempt=t.attempt,
        progress=1.0 if done else t.translated / t.sentences if t.sentences else 0.0,
        rate=rate,
        eta_seconds=round((t.sentences - t.translated) / rate, 1) if rate else None,
        counts=t.settings.get("counts"),
        reference_scores=t.settings.get("reference_scores"),
        backend=t.backend,  # type: ignore[arg-type]  # one of AnsweringBackend, written by the worker
        target_language=t.target_language,
        zero_shot=t.zero_shot,
        created_at=t.created_at,
        started_at=t.started_at,
        finished_at=t.finished_at,
    )


def owned_translation(session: Session, model_id: str, translation_id: str, owner_id: str) -> DatasetTranslation:
    model = owned_model(session, model_id, owner_id)
    row = session.get(DatasetTranslation, translation_id)
    if row is None or row.model_id != model.id:
        raise not_found("dataset translation", translation_id)
    return row


RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "Body is not UTF-8 JSON"},
    404: {"description": "Not found"},
    409: {"description": "The dataset is still being processed"},
    413: {"description": "The organisation's storage quota is used up"},
    422: {
        "description": "Not a translation model, a dataset not yours or failed, a side it does not have, text in "
        "another language than the model's source, settings out of range, a model of several pairs without a "
        "target_language or with one it never saw"
    },
    503: {"description": "Broker unavailable: the translation is failed, ask again"},
}


@router.post(
    "/{model_id}/dataset-translations",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DatasetTranslationPublic,
    responses=RESPONSES,
)
def create_dataset_translation(
    model_id: str,
    body: DatasetTranslationCreate,
    session: SessionDep,
    settings: SettingsDep,
    key: TrainKey,
    request: Request,
) -> DatasetTranslationPublic:
    """Translate a dataset's text (a monolingual dataset's, or one side of a parallel one) with the model into a new
    parallel dataset: by beam search, or by sampling for back-translation; the translations as its targets, or as
    its sources (optionally tagged). An inference worker does it in the background, resuming where it stopped if
    it dies; the new dataset is then parsed and reported on like an upload, its `lineage` naming all of this."""
    model = owned_model(session, model_id, key.owner_id)
    quotas.check_room(session, settings, key.owner_id, f"a dataset translated by model {model.id}")
    details = {"model_id": model.id, "dataset_id": str(body.dataset_id)}
    audit.record(
        session, key, request, "dataset_translation.requested", "dataset_translation", DatasetTranslation, details
    )
    translation = create(session, settings, model, body)
    try:
        dispatch(translation.id)
    except Exception as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"dataset translation {translation.id} could not be queued: the broker is unavailable; ask again",
            headers={"Retry-After": "10"},
        ) from exc
    session.refresh(translation)
    return public(translation)


@router.get(
    "/{model_id}/dataset-translations", response_model=Page[DatasetTranslationPublic], responses={404: RESPONSES[404]}
)
def list_dataset_translations(
    model_id: str, session: SessionDep, key: ReadKey, limit: Limit = 50, offset: Offset = 0
) -> Page[DatasetTranslationPublic]:
    model = owned_model(session, model_id, key.owner_id)
    return paginate(
        session,
        select(DatasetTranslation).where(DatasetTranslation.model_id == model.id),
        (DatasetTranslation.created_at.desc(), DatasetTranslation.id),
        limit,
        offset,
        public,
    )


@router.get(
    "/{model_id}/dataset-translations/{dataset_translation_id}",
    response_model=DatasetTranslationPublic,
    responses={404: RESPONSES[404]},
)
def read_dataset_translation(
    model_id: str, dataset_translation_id: str, session: SessionDep, key: ReadKey
) -> DatasetTranslationPublic:
    return public(owned_translation(session, model_id, dataset_translation_id, key.owner_id))


@router.delete(
    "/{model_id}/dataset-translations/{dataset_translation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: RESPONSES[404]},
)
def delete_dataset_translation(
    model_id: str, dataset_translation_id: str, session: SessionDep, key: TrainKey, request: Request
) -> Response:
    """Delete a dataset translation: a running one stops after its chunk, its parts deleted; the dataset it made,
    once succeeded, stays (delete it as any dataset)."""
    row = owned_translation(session, model_id, dataset_translation_id, key.owner_id)
    details = {"model_id": row.model_id, "status": row.status}
    audit.record(session, key, request, "dataset_translation.deleted", "dataset_translation", row.id, details)
    tombstone_rows.bury(session, row.owner_id, "dataset_translation", row.id, [parts_prefix(row.model_id, row.id)])
    session.delete(row)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
