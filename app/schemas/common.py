"""Base classes shared by every schema."""

from __future__ import annotations

import re
from typing import Annotated, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict

LANGUAGE_PATTERN = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,3}")


def _check_language(code: str) -> str:
    if not LANGUAGE_PATTERN.fullmatch(code):
        raise ValueError(f"language {code!r} must be a BCP 47 tag such as en, de or pt-BR")
    return code


Language = Annotated[str, AfterValidator(_check_language)]  # a model's or a job's source or target language


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
