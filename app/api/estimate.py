"""POST /v1/estimate: parameters by component and memory of a model config, before any job is submitted.

Pure arithmetic on the config (model/anatomy.py), torch-free; the dashboard's new-job form shows it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from app.api.deps import CurrentKey, SettingsDep
from app.job_submission import describe_anatomy, resolve_model_config
from app.schemas.common import Input
from app.schemas.inference import Anatomy
from app.schemas.jobs import ModelSpec

router = APIRouter(prefix="/v1/estimate", tags=["estimate"])
GB = 1024**3


class EstimateRequest(Input):
    model: ModelSpec = ModelSpec()
    tokens_per_batch: int = Field(4096, ge=1, le=10_000_000, description="padded tokens per training batch")


class EstimateResponse(Anatomy):
    config: dict[str, Any] = Field(description="the resolved ModelConfig: preset plus overrides")
    worker_memory_limit_bytes: int
    fits_worker_memory: bool = Field(description="false: POST /v1/jobs would refuse this config and batch size")


@router.post(
    "",
    response_model=EstimateResponse,
    responses={400: {"description": "Body is not UTF-8 JSON"}, 422: {"description": "Invalid model config"}},
)
def estimate(body: EstimateRequest, settings: SettingsDep, _key: CurrentKey) -> EstimateResponse:
    config = resolve_model_config(body.model)
    described = describe_anatomy(config, body.tokens_per_batch)
    limit = int(settings.worker_memory_limit_gb * GB)
    return EstimateResponse(
        **described,
        config=config.to_dict(),
        worker_memory_limit_bytes=limit,
        fits_worker_memory=described["memory"]["training_total_bytes"] <= limit,
    )
