"""Base classes shared by every schema."""

from __future__ import annotations

import re
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, WithJsonSchema, field_validator

NUL_MESSAGE = "may not hold a NUL character (\\u0000)"  # PostgreSQL's text cannot hold one


def holds_nul(value: Any) -> bool:
    """Whether a string, or any string inside lists and dicts (keys too), holds U+0000."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(holds_nul(v) for v in value)
    return False


LANGUAGE_PATTERN = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,3}")


def check_language(code: str) -> str:
    if not LANGUAGE_PATTERN.fullmatch(code):
        raise ValueError(f"language {code!r} must be a BCP 47 tag such as en, de or pt-BR")
    return code


# A model's or a job's source or target language. The OpenAPI states the pattern too (clients and fuzzers then send
# tags), while the check keeps its own message.
Language = Annotated[
    str,
    AfterValidator(check_language),
    WithJsonSchema({"type": "string", "pattern": f"^{LANGUAGE_PATTERN.pattern}$", "examples": ["en", "pt-BR"]}),
]


class Input(BaseModel):
    """A request body: unknown fields (e.g. `status`, `owner`), values of another JSON type than the schema
    says (`0` for a boolean, `"8"` for an integer) and text holding U+0000 are refused with 422."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        """PostgreSQL's text cannot hold U+0000: a field holding one is a 422 naming it, not a 500."""
        if holds_nul(value):
            raise ValueError(f"text {NUL_MESSAGE}")
        return value


class Output(BaseModel):
    model_config = ConfigDict(from_attributes=True)


T = TypeVar("T")


class Page(Output, Generic[T]):
    """A page of a list: `data` plus the `total` count across all pages."""

    data: list[T]
    total: int
    limit: int
    offset: int
