"""The registry's names and aliases as request fields: checked against app/services/model_refs.py's patterns.

Their own module so that the schemas of jobs, sweeps and models all take them without importing one another."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema

from app.services.model_refs import ALIAS_PATTERN, LATEST, NAME_PATTERN


def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"name {name!r} must match ^{NAME_PATTERN.pattern}$: lowercase letters, digits and . _ -, at most 64"
        )
    return name


def check_alias(alias: str) -> str:
    if alias == LATEST:
        raise ValueError(f"alias {alias!r} is reserved: name@latest always means the highest version")
    if not ALIAS_PATTERN.fullmatch(alias):
        raise ValueError(f"alias {alias!r} must match ^{ALIAS_PATTERN.pattern}$: a lowercase letter first")
    return alias


# The OpenAPI states the pattern too; the check keeps its own message.
RegisteredName = Annotated[
    str, AfterValidator(check_name), WithJsonSchema({"type": "string", "pattern": f"^{NAME_PATTERN.pattern}$"})
]
