"""What a key may do: the scopes it holds, capped by its member's role (docs/security.md).

A role caps scopes: viewer ⊆ {read}, member ⊆ {read, inference, train, models:write}, admin holds every scope of an
organisation. A key's effective scopes are the ones it was given that its member's role still allows, computed at each
request, so that lowering a member's role takes effect on the keys it already has.

Scope `operator` is the service's, not an organisation's: it creates organisations and sets their quotas
(app/api/operator.py). Only role `operator` allows it, and that role allows nothing else; operators are members of an
organisation of their own (app/db/operators.py), never of a customer's, so no organisation's key can hold it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Scope(StrEnum):
    READ = "read"  # every GET: datasets, jobs, metrics, models, evaluations, results, workers
    INFERENCE = "inference"  # run a model: translate, fill masks, attention, file translations, embedding probes
    TRAIN = "train"  # datasets, jobs, sweeps, evaluations: what makes or measures models
    MODELS_WRITE = "models:write"  # the registry: import, rename, tag, delete models, move aliases
    ADMIN = "admin"  # the organisation: members, other members' keys, webhooks
    OPERATOR = "operator"  # the service: organisations and their quotas; never an organisation's key


class Role(StrEnum):
    VIEWER = "viewer"
    MEMBER = "member"
    ADMIN = "admin"
    OPERATOR = "operator"  # the service's operators (app/db/operators.py), in an organisation of their own


ALL_SCOPES: tuple[Scope, ...] = tuple(Scope)  # the order answers and messages list scopes in
ORGANISATION_SCOPES: tuple[Scope, ...] = tuple(scope for scope in Scope if scope is not Scope.OPERATOR)
ORGANISATION_ROLES: tuple[Role, ...] = (Role.VIEWER, Role.MEMBER, Role.ADMIN)  # what a member of a customer may be
MAX_EXPIRY_DAYS = 3650  # a key's lifetime, when it has one: ten years at most
MAX_KEY_RATE_LIMIT = 1_000_000  # a key's own requests per minute, when it has one (app/api/ratelimit.py)
ROLE_SCOPES: dict[Role, frozenset[Scope]] = {
    Role.VIEWER: frozenset({Scope.READ}),
    Role.MEMBER: frozenset({Scope.READ, Scope.INFERENCE, Scope.TRAIN, Scope.MODELS_WRITE}),
    Role.ADMIN: frozenset(ORGANISATION_SCOPES),
    Role.OPERATOR: frozenset({Scope.OPERATOR}),
}


def parse_role(value: str) -> Role:
    """The role named `value`; ValueError naming it and the roles there are otherwise."""
    try:
        return Role(value)
    except ValueError:
        raise ValueError(f"unknown role {value!r}: expected one of {', '.join(Role)}") from None


def parse_scopes(values: Iterable[str]) -> list[Scope]:
    """`values` as scopes, in the order of ALL_SCOPES, without repeats; ValueError naming an unknown one."""
    wanted = set()
    for value in values:
        try:
            wanted.add(Scope(value))
        except ValueError:
            raise ValueError(f"unknown scope {value!r}: expected some of {', '.join(ALL_SCOPES)}") from None
    return [scope for scope in ALL_SCOPES if scope in wanted]


def beyond_role(role: Role, scopes: Iterable[Scope]) -> list[Scope]:
    """The scopes of `scopes` that `role` does not allow (none: the role allows them all)."""
    allowed = ROLE_SCOPES[role]
    return [scope for scope in scopes if scope not in allowed]


def effective(role: Role, scopes: Iterable[Scope]) -> frozenset[Scope]:
    """What a key holding `scopes` may do while its member has `role`."""
    return frozenset(scopes) & ROLE_SCOPES[role]


def expiry_days(value: str) -> int:
    """A key's lifetime in days as typed on a command line: 1 to MAX_EXPIRY_DAYS; ValueError naming the value."""
    try:
        days = int(value)
    except ValueError:
        raise ValueError(f"expiry {value!r} is not a whole number of days") from None
    if not 1 <= days <= MAX_EXPIRY_DAYS:
        raise ValueError(f"expiry {days} days is outside 1-{MAX_EXPIRY_DAYS}")
    return days


def key_rate_limit(value: int) -> int:
    """A key's own requests per minute: 1 to MAX_KEY_RATE_LIMIT; ValueError naming the value."""
    if not 1 <= value <= MAX_KEY_RATE_LIMIT:
        raise ValueError(
            f"rate_limit_per_minute {value} is outside 1-{MAX_KEY_RATE_LIMIT}; null gives the key the service's "
            "RATE_LIMIT_PER_MINUTE"
        )
    return value


def sorted_scopes(scopes: Iterable[Scope]) -> list[str]:
    """Scopes as strings in the order of ALL_SCOPES (how answers and messages list them)."""
    held = set(scopes)
    return [scope.value for scope in ALL_SCOPES if scope in held]
