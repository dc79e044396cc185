"""Schemas of trained models."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.schemas.common import Output
from app.schemas.jobs import Objective


class ModelPublic(Output):
    id: str
    job_id: str | None  # None: imported (POST /v1/models/import)
    objective: Objective
    config: dict[str, Any]
    parameters: int
    tokenizer_fingerprint: str
    metrics: dict[str, float]
    source: str
    size_bytes: int
    parent_model_id: str | None = None  # the model its job started from (fine-tuning)
    sha256: str
    created_at: datetime
