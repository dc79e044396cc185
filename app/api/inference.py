"""Inference and introspection of a trained model: translate, fill-mask, attention, neighbours, anatomy."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from app.api import ttl_cache
from app.api.deps import SessionDep, SettingsDep
from app.api.errors import not_found, unprocessable
from app.api.models import owned_model
from app.api.scopes import InferenceKey, ReadKey
from app.api.server_timing import set_server_timing
from app.api.ttl_cache import ModelFacts
from app.core.settings import Settings
from app.core.task_names import ATTENTION, FILL_MASK, GEOMETRY, NEIGHBORS, TRANSLATE
from app.schemas.anatomy import AnatomyResponse
from app.schemas.inference import (
    AttentionRequest,
    AttentionResponse,
    FillMaskRequest,
    FillMaskResponse,
    GeometryResponse,
    NeighborsResponse,
    TranslateRequest,
    TranslateResponse,
    Translation,
)
from app.schemas.jobs import TrainingSpec
from app.services import glossaries, inference_client, inference_limits, model_refs, target_languages
from app.services.job_submission import describe_anatomy
from app.services.memory_requests import check_memory
from model.nn.config import ModelConfig

router = APIRouter(prefix="/v1/models", tags=["inference"])
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "Not found"},
    422: {"description": "Invalid request or over a limit"},
    503: {"description": "Queue full or broker down"},
    504: {"description": "No worker answered in time"},
}
BODY_ERRORS: dict[int | str, dict[str, Any]] = {**ERRORS, 400: {"description": "Body is not UTF-8 JSON"}}


def served_model(session: Session, model_id: str, owner_id: str, route: str = "", objective: str = "") -> ModelFacts:
    """The model's id, owner and objective, as looked up in the last AUTH_CACHE_SECONDS or now; 404 unless it is
    the caller's, 422 unless it was trained for `objective` (when given) to serve `route`. A worker loads the files
    themselves and verifies them against their sha256.

    `model_id` may be a `name@alias` reference: that is resolved now, every time (an alias that moved is followed
    at once), and only what it resolved to is cached, by the model's id."""
    facts = ttl_cache.models().get(model_id) if model_refs.is_plain_id(model_id) else None
    if facts is None:
        row = owned_model(session, model_id, owner_id)
        calibration = row.confidence_calibration
        threshold = calibration["threshold"] if calibration else None
        facts = ModelFacts(
            id=row.id,
            owner_id=row.owner_id,
            objective=row.objective,
            low_confidence_below=threshold,
            languages=(row.source_language, row.target_language),
            pairs=target_languages.trained_pairs(row),
            beam_size=row.beam_size,
        )
        ttl_cache.models().put(row.id, facts)
    if facts.owner_id != owner_id:
        raise not_found("model", model_id)
    if objective and facts.objective != objective:
        raise unprocessable(
            "", f"model {model_id} was trained for {facts.objective}; {route} needs a {objective} model"
        )
    return facts


def _check_texts(settings: Settings, texts: list[str], field: str, session: Session | None = None) -> None:
    """Each text's length, and with a session (a route that takes several texts) their number."""
    if session is not None:
        limit, source = inference_limits.max_texts_per_request(session, settings)
        if len(texts) > limit:
            raise unprocessable(field, f"{len(texts)} texts exceed the limit of {limit} per request ({source})")
    for i, text in enumerate(texts):
        if len(text) > settings.max_chars_per_text:
            raise unprocessable(
                f"{field}.{i}" if field == "texts" else field,
                f"{len(text)} characters exceed the limit of {settings.max_chars_per_text} (MAX_CHARS_PER_TEXT)",
            )
        if not text.strip():
            raise unprocessable(f"{field}.{i}" if field == "texts" else field, "text is empty")


@router.post("/{model_id}/translate", response_model=TranslateResponse, responses=BODY_ERRORS)
def translate(
    model_id: str,
    body: TranslateRequest,
    session: SessionDep,
    settings: SettingsDep,
    key: InferenceKey,
    response: Response,
) -> TranslateResponse:
    started = time.perf_counter()
    model = served_model(session, model_id, key.owner_id, "translate", "translation")
    model_id, threshold = model.id, model.low_confidence_below
    _check_texts(settings, body.texts, "texts", session)
    beam_size = inference_limits.beam_size(settings, body.beam_size, model.beam_size)
    if body.n_best > beam_size:
        whose = "" if body.beam_size is not None else ", the model's default"
        raise unprocessable("n_best", f"n_best={body.n_best} cannot exceed beam_size={beam_size}{whose}")
    if body.memory is not None:
        check_memory(session, key, body.memory, model.languages)
    target = target_languages.resolve(
        model_id, model.pairs, model.languages, body.target_language, body.source_language
    )
    glossary = None
    if body.glossary_id is not None:
        glossary = glossaries.for_translation(session, key.owner_id, body.glossary_id, model.languages)
    session.close()  # do not hold a connection while a worker decodes
    memory = body.memory.model_dump() if body.memory is not None else None
    options: dict[str, Any] = {
        "beam_size": beam_size,
        "n_best": body.n_best,
        "max_length": body.max_length,
        "return_alignment": body.return_alignment,
        "backend": body.backend,
        "return_token_probs": body.return_token_probs,
        "memory": memory,
        "glossary": glossary,
    }
    if target.tag is not None:  # a worker of an earlier version, which takes no target_language, serves the rest
        options["target_language"] = target.tag
    answer = inference_client.coalescer(settings).run(
        (
            model_id,
            *(v for k, v in options.items() if k not in ("memory", "glossary")),
            json.dumps(memory, sort_keys=True),
            body.glossary_id,
        ),
        body.texts,
        lambda texts: inference_client.call(settings, TRANSLATE, [model_id, texts], options)[0],
    )
    elapsed = (time.perf_counter() - started) * 1000
    compute_ms = float(answer.get("compute_ms", 0.0))  # 0: a worker of an earlier version, which did not say
    set_server_timing(response, elapsed, compute_ms)
    return TranslateResponse(
        translations=flag_low_confidence(answer["translations"], threshold),
        model_id=model_id,
        backend=answer["backend"],  # the one that answered: "auto" asks the worker to choose
        elapsed_ms=round(elapsed, 2),
        compute_ms=compute_ms,
        beam_size=beam_size,
        target_language=target.tag,
        zero_shot=target.zero_shot,
    )


def flag_low_confidence(translations: list[dict[str, Any]], threshold: float | None) -> list[Translation]:
    """Each translation with low_confidence, where the model has a calibrated threshold and the worker a confidence."""
    flagged = [
        {**t, "low_confidence": t["confidence"] < threshold}
        if threshold is not None and t.get("confidence") is not None
        else t
        for t in translations
    ]
    return [Translation.model_validate(t) for t in flagged]


@router.post("/{model_id}/fill-mask", response_model=FillMaskResponse, responses=BODY_ERRORS)
def fill_mask(
    model_id: str,
    body: FillMaskRequest,
    session: SessionDep,
    settings: SettingsDep,
    key: InferenceKey,
    response: Response,
) -> FillMaskResponse:
    started = time.perf_counter()
    model_id = served_model(session, model_id, key.owner_id, "fill-mask", "denoising").id
    _check_texts(settings, [body.text], "text")
    if "<mask>" not in body.text:
        raise unprocessable("text", "text has no <mask> to fill")
    if body.top_k > settings.max_top_k:
        raise unprocessable("top_k", f"top_k={body.top_k} exceeds MAX_TOP_K={settings.max_top_k}")
    session.close()
    answer, _ = inference_client.call(settings, FILL_MASK, [model_id, body.text, body.top_k])
    elapsed = (time.perf_counter() - started) * 1000
    compute_ms = float(answer.get("compute_ms", 0.0))
    set_server_timing(response, elapsed, compute_ms)
    return FillMaskResponse(
        masks=answer["masks"], model_id=model_id, elapsed_ms=round(elapsed, 2), compute_ms=compute_ms
    )


@router.post("/{model_id}/attention", response_model=AttentionResponse, responses=BODY_ERRORS)
def attention(
    model_id: str,
    body: AttentionRequest,
    session: SessionDep,
    settings: SettingsDep,
    key: InferenceKey,
    response: Response,
) -> AttentionResponse:
    started = time.perf_counter()
    model_id = served_model(session, model_id, key.owner_id).id
    _check_texts(settings, [body.text], "text")
    if body.target is not None:
        _check_texts(settings, [body.target], "target")
    session.close()
    answer, _ = inference_client.call(settings, ATTENTION, [model_id, body.text, body.target])
    set_server_timing(response, (time.perf_counter() - started) * 1000, answer.pop("compute_ms", 0.0))
    return AttentionResponse(**answer)


@router.get("/{model_id}/neighbors", response_model=NeighborsResponse, responses=ERRORS)
def neighbors(
    model_id: str,
    session: SessionDep,
    settings: SettingsDep,
    key: InferenceKey,
    token: Annotated[str, Query(min_length=1, max_length=100)],
    response: Response,
    k: Annotated[int, Query(ge=1, le=100)] = 10,
) -> NeighborsResponse:
    started = time.perf_counter()
    model_id = served_model(session, model_id, key.owner_id).id
    session.close()
    answer, _ = inference_client.call(settings, NEIGHBORS, [model_id, token, k])
    set_server_timing(response, (time.perf_counter() - started) * 1000, answer.pop("compute_ms", 0.0))
    return NeighborsResponse(**answer)


@router.get("/{model_id}/geometry", response_model=GeometryResponse, responses=ERRORS)
def geometry(
    model_id: str, session: SessionDep, settings: SettingsDep, key: InferenceKey, response: Response
) -> GeometryResponse:
    """Are W_Q and W_K the embedding? Their shapes and storage, whether the embedding is tied to the output
    projection, and per layer how much the input directions each projection amplifies most overlap the
    embedding's principal directions (cosines of principal angles; `random_baseline` is chance)."""
    started = time.perf_counter()
    served_model(session, model_id, key.owner_id)
    session.close()
    answer, _ = inference_client.call(settings, GEOMETRY, [model_id])
    set_server_timing(response, (time.perf_counter() - started) * 1000, answer.pop("compute_ms", 0.0))
    return GeometryResponse(**answer)


@router.get("/{model_id}/anatomy", response_model=AnatomyResponse, responses={404: {"description": "Not found"}})
def anatomy(
    model_id: str,
    session: SessionDep,
    key: ReadKey,
    tokens_per_batch: Annotated[int | None, Query(ge=1, le=10_000_000)] = None,
    precision: Annotated[Literal["fp32", "bf16"] | None, Query()] = None,
) -> AnatomyResponse:
    """Parameters by component and memory estimates, computed from the stored config (no worker needed). By
    default for the job that trained the model: its max_tokens_per_batch, and its precision (the one it asked for,
    else bf16 when it ran on a GPU and fp32 otherwise, as the trainer resolves it); 4096 and fp32 without a job."""
    model = owned_model(session, model_id, key.owner_id)
    config = ModelConfig.from_dict(model.config)
    job = model.job
    training = TrainingSpec.stored(job.training_config if job else None)  # without a job: the defaults
    if tokens_per_batch is None:
        tokens_per_batch = training.max_tokens_per_batch
    ran_on_gpu = bool(job and job.device and "cuda" in job.device)  # "cuda:0", or "2x cuda" data-parallel
    chosen: str = precision or training.precision or ("bf16" if ran_on_gpu else "fp32")
    return AnatomyResponse(model_id=model.id, precision=chosen, **describe_anatomy(config, tokens_per_batch, chosen))
