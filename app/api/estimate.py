"""POST /v1/estimate: parameters by component and memory of a model config, before any job is submitted.

Pure arithmetic on the config (model/anatomy.py), torch-free; the dashboard's new-job form shows it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from app.api.deps import CurrentKey, SettingsDep
from app.api.errors import unprocessable
from app.schemas.common import Input, Output
from app.schemas.inference import ParameterGroup
from app.schemas.jobs import ModelSpec
from model.anatomy import count_parameters, estimate_memory, parameter_groups
from model.config import ModelConfig

router = APIRouter(prefix="/v1/estimate", tags=["estimate"])
GB = 1024**3


class EstimateRequest(Input):
    model: ModelSpec = ModelSpec()
    tokens_per_batch: int = Field(4096, ge=1, le=10_000_000, description="padded tokens per training batch")


class EstimateResponse(Output):
    config: dict[str, Any] = Field(description="the resolved ModelConfig: preset plus overrides")
    total_parameters: int
    by_component: dict[str, int]
    by_kind: dict[str, int]
    parameters: list[ParameterGroup]
    memory: dict[str, int] = Field(description="bytes: weights, gradients, Adam state, activations, training "
                                               "total, inference")
    tokens_per_batch: int
    worker_memory_limit_bytes: int
    fits_worker_memory: bool = Field(description="false: POST /v1/jobs would refuse this config and batch size")


@router.post("", response_model=EstimateResponse, responses={422: {"description": "Invalid model config"}})
def estimate(body: EstimateRequest, settings: SettingsDep, _key: CurrentKey) -> EstimateResponse:
    try:
        config = ModelConfig.from_preset(body.model.preset, body.model.vocab_size, **body.model.overrides())
    except ValueError as exc:
        raise unprocessable("model", str(exc)) from exc
    counts = count_parameters(config)
    memory = estimate_memory(config, body.tokens_per_batch)
    limit = int(settings.worker_memory_limit_gb * GB)
    return EstimateResponse(config=config.to_dict(), total_parameters=counts["total"],
                            by_component=counts["by_component"], by_kind=counts["by_kind"],
                            parameters=parameter_groups(config), memory=memory,
                            tokens_per_batch=body.tokens_per_batch, worker_memory_limit_bytes=limit,
                            fits_worker_memory=memory["training_total_bytes"] <= limit)
