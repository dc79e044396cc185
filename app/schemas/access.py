"""Schemas of who may do what: the caller (`GET /v1/me`), members of an organisation and their API keys."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field, WithJsonSchema, model_validator

from app.core.scopes import MAX_EXPIRY_DAYS, MAX_KEY_RATE_LIMIT, ORGANISATION_ROLES, Role, Scope, key_rate_limit
from app.schemas.common import Input, Output

Name = Annotated[str, Field(min_length=1, max_length=100)]
# Strict input refuses a string for an enum: requests name scopes and roles as these literals. A key asking for
# `operator` is refused by the service, naming it (only an operator's key holds it); a member is never made an operator
# over the API (app/db/operators.py).
ScopeName = Literal["read", "inference", "train", "models:write", "admin", "operator"]
RoleName = Literal["viewer", "member", "admin"]
# A key's own requests per minute: out of bounds is a 422 naming the value (app/core/scopes.py key_rate_limit).
KeyRateLimit = Annotated[
    int,
    AfterValidator(key_rate_limit),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_KEY_RATE_LIMIT}),
]
assert set(get_args(ScopeName)) == {s.value for s in Scope}
assert set(get_args(RoleName)) == {r.value for r in ORGANISATION_ROLES}


class Me(Output):
    """The caller: its organisation, member, role, and its key with what the key may do now."""

    owner: str  # the organisation's name (its first name, kept for clients that read it)
    organisation: str
    member: str
    role: Role
    key_id: str
    key_name: str
    key_prefix: str
    scopes: list[Scope]  # what the key may use now: its scopes that the member's role allows
    key_scopes: list[Scope]  # the scopes the key was given
    expires_at: datetime | None


class MemberCreate(Input):
    name: Name
    role: RoleName = "member"


class MemberUpdate(Input):
    role: RoleName


class MemberPublic(Output):
    id: str
    name: str
    role: Role
    created_at: datetime


class KeyCreate(Input):
    """A new key. `scopes` default to the caller's own (within the member's role); `member` (a name or id) is for
    admins creating a key for someone else, and so is `rate_limit_per_minute` (default: the service's
    RATE_LIMIT_PER_MINUTE); at most one of `expires_at` and `expires_in_days`."""

    name: Name
    scopes: list[ScopeName] | None = None
    member: Name | None = None
    expires_at: Annotated[datetime, Field(strict=False)] | None = None  # ISO 8601 with its timezone
    expires_in_days: Annotated[int, Field(ge=1, le=MAX_EXPIRY_DAYS)] | None = None
    rate_limit_per_minute: KeyRateLimit | None = None

    @model_validator(mode="after")
    def _one_expiry(self) -> KeyCreate:
        if self.expires_at is not None and self.expires_in_days is not None:
            raise ValueError("give expires_at or expires_in_days, not both")
        if self.expires_at is not None and self.expires_at.tzinfo is None:
            raise ValueError(f"expires_at {self.expires_at.isoformat()} needs a timezone, e.g. Z or +00:00")
        return self


class KeyUpdate(Input):
    """A key's own requests per minute (admins); null: the service's RATE_LIMIT_PER_MINUTE again."""

    rate_limit_per_minute: KeyRateLimit | None


class KeyPublic(Output):
    id: str
    prefix: str  # the first characters of the key, to tell keys apart
    name: str
    scopes: list[Scope]
    member: str
    member_id: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    rate_limit_per_minute: int | None  # its own; null: the service's RATE_LIMIT_PER_MINUTE


class KeyWithSecret(KeyPublic):
    key: str  # the clear key: shown in this answer only, never stored
