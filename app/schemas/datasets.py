"""Schemas of datasets."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

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
    parent_id: str | None = Field(None, description="the dataset it was filtered or translated from")
    parent_deleted: bool = Field(False, description="that dataset was deleted since: `parent_id` names it")
    filter_rules: dict[str, Any] | None = None
    filter_counts: dict[str, Any] | None = Field(None, description="rows each filter rule removed, kept and total")
    lineage: dict[str, Any] | None = Field(
        None,
        description="where a dataset the service made came from: for corrections gathered to adapt a model, "
        '{"kind": "corrections", "model_id", "models" (whose corrections), "corrections" (how many), "through" (the '
        "last one's time)}; for a dataset translated by a model, "
        '{"kind": "translation", "translation_id", "model_id", "dataset_id" (translated), "side", "decoding", '
        '"synthetic_side", "tag" (if any)}',
    )
    created_at: datetime
    processed_at: datetime | None = None


class DatasetRegister(Input):
    """A dataset read in place from an object-store URI the service may read for the organisation
    (DATASET_URI_PREFIXES, narrowed by its own list: app/services/dataset_uris.py)."""

    name: str = Field(min_length=1, max_length=200)
    kind: DatasetKind
    uri: str = Field(min_length=6, max_length=1000, description="s3://bucket/key (.gz: gzip-compressed)")
    format: Literal["auto", "jsonl", "tsv"] = "auto"
    source_language: Language | None = Field(None, description="the language its sources are in (BCP 47, e.g. en)")
    target_language: Language | None = Field(None, description="the language its targets are in (BCP 47, e.g. de)")


class FilterRules(Input):
    """Cleaning rules, each a problem of the data report (docs/data.md); every rule is off unless set. The worker
    applies them with model/data/filters.py, in its order, each removed row counted under the first rule that
    removed it."""

    drop_empty: bool = Field(False, description="a side that is empty or whitespace")
    drop_invalid_characters: bool = Field(False, description="control, replacement, private-use or bidi characters")
    min_length: int | None = Field(None, ge=0, description="fewer words than this on a side")
    max_length: int | None = Field(None, ge=1, description="more words than this on a side")
    max_ratio: float | None = Field(None, gt=1, description="the longer side this many times the shorter (characters)")
    deduplicate: bool = Field(False, description="keep the first of identical pairs")
    drop_copies: bool = Field(False, description="a target that is its source")
    drop_placeholder_mismatches: bool = Field(False, description="%s, {0}, <b>... on one side only")
    drop_wrong_language: bool = Field(False, description="a side not in the dataset's declared language")
    language_odds: float | None = Field(None, gt=1, description="how much likelier the other language must be")
    language_min_chars: int | None = Field(None, ge=1, description="sides shorter than this are not identified")
    drop_misaligned: bool = Field(False, description="a target that does not translate its source (lexical score)")

    @model_validator(mode="after")
    def _consistent(self) -> FilterRules:
        if self.min_length is not None and self.max_length is not None and self.min_length > self.max_length:
            raise ValueError(f"min_length={self.min_length} is greater than max_length={self.max_length}")
        if not self.active():
            raise ValueError("no rule is on: set at least one (deduplicate, drop_copies, max_ratio, ...)")
        return self

    def active(self) -> list[str]:
        return [
            name
            for name, value in self.model_dump(exclude={"language_odds", "language_min_chars"}).items()
            if value not in (None, False)
        ]


class DatasetFilter(Input):
    """POST /v1/datasets/{id}/filter: a new dataset of the rows the rules keep."""

    name: str | None = Field(None, min_length=1, max_length=200, description="default: the parent's + (filtered)")
    rules: FilterRules
