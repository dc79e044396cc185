"""Scores of a model on test sets: POST/GET /v1/models/{id}/evaluations, and each evaluation's hypotheses."""

from __future__ import annotations

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
from app.artifacts import ArtifactStoreError, get_store
from app.db import task_rows
from app.db.background_tables import Evaluation
from app.schemas.common import Page
from app.schemas.evaluations import EvaluationCreate, EvaluationPublic
from app.services.evaluations import create, dispatch

router = APIRouter(prefix="/v1/models", tags=["evaluations"])


def public(evaluation: Evaluation) -> EvaluationPublic:
    done = evaluation.status == task_rows.SUCCEEDED
    return EvaluationPublic(
        id=evaluation.id,
        model_id=evaluation.model_id,
        dataset_id=evaluation.dataset_id,
        job_id=evaluation.job_id,
        status=evaluation.status,  # type: ignore[arg-type]  # one of EvaluationStatus, written by task_rows
        error=evaluation.error,
        settings=evaluation.settings,
        sentences=evaluation.sentences,
        translated=evaluation.translated,
        attempt=evaluation.attempt,
        progress=1.0 if done else evaluation.translated / max(evaluation.sentences, 1),
        scores=evaluation.scores,
        backend=evaluation.backend,  # type: ignore[arg-type]  # one of AnsweringBackend, written by the worker
        target_language=evaluation.target_language,
        zero_shot=evaluation.zero_shot,
        hypotheses_url=(f"/v1/models/{evaluation.model_id}/evaluations/{evaluation.id}/hypotheses" if done else None),
        created_at=evaluation.created_at,
        started_at=evaluation.started_at,
        finished_at=evaluation.finished_at,
    )


def owned_evaluation(session: Session, model_id: str, evaluation_id: str, owner_id: str) -> Evaluation:
    model = owned_model(session, model_id, owner_id)
    evaluation = session.get(Evaluation, evaluation_id)
    if evaluation is None or evaluation.model_id != model.id:
        raise not_found("evaluation", evaluation_id)
    return evaluation


RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "Body is not UTF-8 JSON"},
    404: {"description": "Not found"},
    422: {
        "description": "Not a translation model, a dataset not yours or not parallel, a beam over the limit, a model "
        "of several pairs without a target_language (nor a test set of one of its pairs) or with one it never saw"
    },
    503: {"description": "Broker unavailable: the evaluation is failed, ask again"},
}


@router.post(
    "/{model_id}/evaluations",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=EvaluationPublic,
    responses=RESPONSES,
)
def create_evaluation(
    model_id: str,
    body: EvaluationCreate,
    session: SessionDep,
    settings: SettingsDep,
    key: TrainKey,
    request: Request,
) -> EvaluationPublic:
    """Translate the dataset's sources with the model and score them against its targets (sacrebleu BLEU, chrF,
    chrF++); an inference worker does it in the background: poll the evaluation for progress and scores."""
    model = owned_model(session, model_id, key.owner_id)
    details = {"model_id": model.id, "dataset_id": str(body.dataset_id)}
    audit.record(session, key, request, "evaluation.requested", "evaluation", Evaluation, details)
    evaluation = create(session, settings, model, body)
    try:
        dispatch(evaluation.id)
    except Exception as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"evaluation {evaluation.id} could not be queued: the broker is unavailable; ask again",
            headers={"Retry-After": "10"},
        ) from exc
    session.refresh(evaluation)
    return public(evaluation)


@router.get("/{model_id}/evaluations", response_model=Page[EvaluationPublic], responses={404: RESPONSES[404]})
def list_evaluations(
    model_id: str, session: SessionDep, key: ReadKey, limit: Limit = 50, offset: Offset = 0
) -> Page[EvaluationPublic]:
    model = owned_model(session, model_id, key.owner_id)
    return paginate(
        session,
        select(Evaluation).where(Evaluation.model_id == model.id),
        (Evaluation.created_at.desc(), Evaluation.id),
        limit,
        offset,
        public,
    )


@router.get("/{model_id}/evaluations/{evaluation_id}", response_model=EvaluationPublic, responses={404: RESPONSES[404]})
def read_evaluation(model_id: str, evaluation_id: str, session: SessionDep, key: ReadKey) -> EvaluationPublic:
    return public(owned_evaluation(session, model_id, evaluation_id, key.owner_id))


@router.get(
    "/{model_id}/evaluations/{evaluation_id}/hypotheses",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "One translation per line, in the dataset's order"},
        404: RESPONSES[404],
        409: {"description": "Not succeeded (yet)"},
        503: {"description": "Artifact store unavailable"},
    },
)
def read_hypotheses(model_id: str, evaluation_id: str, session: SessionDep, key: ReadKey) -> Response:
    evaluation = owned_evaluation(session, model_id, evaluation_id, key.owner_id)
    if evaluation.status != task_rows.SUCCEEDED or evaluation.hypotheses_key is None:
        raise HTTPException(
            status.HTTP_409_CONFLICT, f"evaluation {evaluation_id} is {evaluation.status}, not succeeded"
        )
    try:
        data = get_store().read_bytes(evaluation.hypotheses_key)
    except ArtifactStoreError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, f"the artifact store is unavailable ({type(exc).__name__}); try again"
        ) from exc
    return Response(
        data,
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{evaluation_id}.hyp.txt"'},
    )
