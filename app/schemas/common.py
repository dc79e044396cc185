"""Base classes shared by every schema."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict


class Input(BaseModel):
    """A request body: unknown fields (e.g. `status`, `owner`) are refused with 422."""

    model_config = ConfigDict(extra="forbid")


class Output(BaseModel):
    model_config = ConfigDict(from_attributes=True)


T = TypeVar("T")


class Page(Output, Generic[T]):
    """A page of a list: `data` plus the `total` count across all pages."""

    data: list[T]
    total: int
    limit: int
    offset: int
