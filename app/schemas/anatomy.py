"""Schemas of a model's anatomy: its parameters by component and memory estimates, from its config alone."""

from __future__ import annotations

from pydantic import Field

from app.schemas.common import Output


class ParameterGroup(Output):
    component: str
    name: str
    symbol: str
    shape: list[int]
    count: int


class Anatomy(Output):
    """Parameters by component and memory estimates of a model config (pure arithmetic, no worker)."""

    total_parameters: int
    by_component: dict[str, int]
    by_kind: dict[str, int]
    parameters: list[ParameterGroup]
    memory: dict[str, int] = Field(
        description="bytes: weights, gradients, Adam state, activations for the "
        "training batch, training total, inference"
    )
    tokens_per_batch: int


class AnatomyResponse(Anatomy):
    model_id: str
    precision: str = Field(description="the precision `memory` is estimated in: the training job's by default")
