"""Schemas of datasets."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from app.schemas.common import Input, Language, Output

DatasetKind = Literal["parallel", "monolingual"]
DatasetStatus = Literal["processing", "ready", "failed"]


class DatasetPublic(Output):
    id: str
    name: str
    kind: DatasetKind
    status: DatasetStatus = Field(description="processing (a worker parses it) -> ready | failed")
    error: str | None = Field(None, description="why it failed: the first bad line's number and what is wrong")
    error_line: int | None = None
    format: Literal["jsonl", "tsv", "text", "auto"] = Field(description="auto until a worker has parsed it")
    compression: Literal["none", "gzip"]
    rows: int = Field(description="0 until parsed")
    size_bytes: int = Field(description="as stored: compressed, for a gzip file")
    sha256: str = Field(description="of the stored bytes; empty until parsed for a dataset registered from a URI")
    source_uri: str | None = Field(None, description="the object-store URI it is read from in place, if registered")
    source_language: str | None = None
    target_language: str | None = None
    stats: dict[str, Any]
    parent_id: str | None = Field(None, description="the dataset it was filtered from")
    filter_rules: dict[str, Any] | None = None
    filter_counts: dict[str, Any] | None = Field(None, description="rows each filter rule removed, kept and total")
    created_at: datetime
    processed_at: datetime | None = None


class DatasetRegister(Input):
    """A dataset read in place from an object-store URI the service may read (DATASET_URI_PREFIXES)."""

    name: str = Field(min_length=1, max_length=200)
    kind: DatasetKind
    uri: str = Field(min_length=6, max_length=1000, description="s3://bucket/key (.gz: gzip-compressed)")
    format: Literal["auto", "jsonl", "tsv"] = "auto"
    source_language: Language | None = Field(None, description="the language its sources are in (BCP 47, e.g. en)")
    target_language: Language | None = Field(None, description="the language its targets are in (BCP 47, e.g. de)")
