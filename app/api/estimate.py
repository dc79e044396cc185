"""POST /v1/estimate: parameters by component and memory of a model config, before any job is submitted.

Pure arithmetic on the config (model/probes/anatomy.py), torch-free; the dashboard's new-job form shows it.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import Field

from app.api.deps import SessionDep, SettingsDep
from app.api.scopes import ReadKey
from app.schemas.anatomy import Anatomy
from app.schemas.common import Input
from app.schemas.jobs import ModelSpec
from app.services.job_submission import candidate_configs, describe_anatomy, memory_limits, memory_refusal

router = APIRouter(prefix="/v1/estimate", tags=["estimate"])


class EstimateRequest(Input):
    model: ModelSpec = ModelSpec()
    tokens_per_batch: int = Field(4096, ge=1, le=10_000_000, description="padded tokens per training batch")
    accelerator: Literal["any", "gpu", "cpu"] = Field("cpu", description="the device the memory is estimated for")
    precision: Literal["fp32", "bf16"] | None = Field(None, description="default: bf16 on a GPU, fp32 on a CPU")


class EstimateResponse(Anatomy):
    preset: str = Field(
        description="the preset the figures are for: the one asked for, or with auto the smallest the worker may "
        "choose (it chooses among those that fit when the job starts)"
    )
    config: dict[str, Any] = Field(description="the resolved ModelConfig: preset plus overrides")
    precision: str = Field(description="the precision `memory` is estimated in")
    worker_memory_limit_bytes: int | None = Field(
        description="the device memory a job is checked against: WORKER_MEMORY_LIMIT_GB for a CPU, the largest "
        "GPU of the training workers for a GPU (null while no GPU worker has registered)"
    )
    fits_worker_memory: bool = Field(description="false: POST /v1/jobs would refuse this config and batch size")


@router.post(
    "",
    response_model=EstimateResponse,
    responses={400: {"description": "Body is not UTF-8 JSON"}, 422: {"description": "Invalid model config"}},
)
def estimate(body: EstimateRequest, session: SessionDep, settings: SettingsDep, _key: ReadKey) -> EstimateResponse:
    preset, config = candidate_configs(body.model)[0]
    limits = memory_limits(session, settings, body.accelerator)
    precision = body.precision or (limits[-1].default_precision if limits else "bf16")
    described = describe_anatomy(config, body.tokens_per_batch, precision)
    refusal = memory_refusal(session, settings, config, body.tokens_per_batch, body.accelerator, body.precision)
    return EstimateResponse(
        **described,
        preset=preset,
        config=config.to_dict(),
        precision=precision,
        worker_memory_limit_bytes=max((limit.bytes for limit in limits), default=None),
        fits_worker_memory=refusal is None,
    )
