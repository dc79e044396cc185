"""Schemas of an organisation's own settings: the object-store prefixes its datasets may be registered from."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from app.schemas.common import Input, Output
from app.services.dataset_uris import MAX_PREFIXES

Prefix = Annotated[str, Field(min_length=5, max_length=1000)]


class UriPrefixesUpdate(Input):
    """The organisation's own list, each prefix within DATASET_URI_PREFIXES; null: all of DATASET_URI_PREFIXES."""

    prefixes: list[Prefix] | None = Field(
        max_length=MAX_PREFIXES,
        description="s3://bucket or s3://bucket/key/prefix, compared segment by segment; [] allows nothing",
    )


class UriPrefixesPublic(Output):
    """Where the organisation's datasets may be registered from: under a prefix of `effective`."""

    installation: list[str] = Field(description="the service's DATASET_URI_PREFIXES, the ceiling")
    organisation: list[str] | None = Field(description="the organisation's own list; null: all of the installation's")
    effective: list[str] = Field(description="what both allow")
