"""The language pairs of a job that trains one model for several (model/data/language_pairs.py): each a dataset
whose declared languages name its pair."""

from __future__ import annotations

from uuid import UUID

from pydantic import Field

from app.schemas.common import Input, Output

MAX_PAIRS = 16


class JobPair(Input):
    dataset_id: UUID = Field(
        strict=False,
        description="a parallel dataset whose source_language and target_language (declared at upload) name the pair",
    )


class JobPairPublic(Output):
    dataset_id: str | None = Field(description="None once the dataset is deleted")
    dataset_name: str | None = Field(None, description="the dataset's name (None once deleted)")
    source_language: str
    target_language: str
