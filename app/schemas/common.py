"""Base classes shared by every schema."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict


class Input(BaseModel):
    """A request body: unknown fields (e.g. `status`, `owner`) and values of another JSON type than the schema
    says (`0` for a boolean, `"8"` for an integer) are refused with 422."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Output(BaseModel):
    model_config = ConfigDict(from_attributes=True)


T = TypeVar("T")


class Page(Output, Generic[T]):
    """A page of a list: `data` plus the `total` count across all pages."""

    data: list[T]
    total: int
    limit: int
    offset: int
