"""Schemas of datasets."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from app.schemas.common import Output

DatasetKind = Literal["parallel", "monolingual"]


class DatasetPublic(Output):
    id: str
    name: str
    kind: DatasetKind
    format: Literal["jsonl", "tsv", "text"]
    rows: int
    size_bytes: int
    sha256: str
    stats: dict[str, Any]
    created_at: datetime
