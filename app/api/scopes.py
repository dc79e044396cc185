"""Authorization: every /v1 route declares the scope it needs, once, in its signature.

A route takes its key as one of the aliases below (`key: TrainKey`), or, if it has no use for the key, declares
`dependencies=[requires(Scope.READ)]`. Either is FastAPI's `Security(authorize, scopes=[...])`, so OpenAPI shows
the scope on the operation's bearer requirement (`{"HTTPBearer": ["train"]}`, as OpenAPI 3.1 allows for any scheme),
and `declare_scopes(app)` (run by the app factory) refuses to build an app with a /v1 route that declares none, or
two, and copies each one into the operation as `x-required-scope`. Forgetting is a startup error, not an open route.
One declaration may name several scopes, all needed (POST /v1/sweeps: `train` to run its trials, `models:write` to
register the best one); `x-required-scope` then lists them with a space between, as OAuth writes a set of scopes. Or
it may name scopes of which one suffices (`requires_any`: the job routes take `read`, or `train` for the jobs the key
submitted); OpenAPI then lists one bearer requirement per scope, its alternatives, and `x-required-scope` says
`read or train`; the route narrows what the key sees by the scope it holds.

A key missing a scope gets 403 naming the first it lacks and what the key holds; every authorized request counts
against the key's rate (app/api/ratelimit.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Request, Security, status
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.security import SecurityScopes

from app.api.deps import CurrentKey, SettingsDep
from app.api.ratelimit import count_request
from app.core.scopes import ROLE_SCOPES, Scope, sorted_scopes
from app.db.keys import Caller

BEARER = "HTTPBearer"  # the security scheme's name in OpenAPI (app/api/deps.py)
ANY_KEY = "any key"  # what `x-required-scope` says of a route every valid key may call
NO_SCOPE_LINE = "Required scope: none (any valid API key)."


def _refusal(key: Caller, needed: Scope, request: Request) -> str:
    route = f"{request.method} {request.url.path}"
    if needed in key.key_scopes:  # given to the key, taken away since by its member's role
        allowed = ", ".join(sorted_scopes(ROLE_SCOPES[key.role]))
        return (
            f"API key {key.prefix}... holds scope {needed.value!r}, which {route} needs, but its member "
            f"{key.member_name!r} is now a {key.role.value}, whose keys may use only: {allowed}"
        )
    held = ", ".join(sorted_scopes(key.scopes)) or "none"
    return f"API key {key.prefix}... lacks scope {needed.value!r}, which {route} needs; its scopes: {held}"


async def authorize(
    security_scopes: SecurityScopes, request: Request, key: CurrentKey, settings: SettingsDep
) -> Caller:
    """The caller, if its key holds every scope the route declared (an empty declaration: any valid key); 403 naming
    the first it lacks otherwise."""
    await count_request(key, settings)
    for name in security_scopes.scopes:
        needed = Scope(name)
        if needed not in key.scopes:
            raise HTTPException(status.HTTP_403_FORBIDDEN, _refusal(key, needed, request))
    return key


def requires(*scopes: Scope) -> Any:
    """The declaration of a route that needs every one of `scopes` (none: any valid key), for `dependencies=[...]`."""
    return Security(authorize, scopes=[scope.value for scope in scopes])


async def authorize_any(
    security_scopes: SecurityScopes, request: Request, key: CurrentKey, settings: SettingsDep
) -> Caller:
    """The caller, if its key holds one of the scopes the route declared; 403 naming them otherwise."""
    await count_request(key, settings)
    needed = [Scope(name) for name in security_scopes.scopes]
    if any(scope in key.scopes for scope in needed):
        return key
    taken = [scope for scope in needed if scope in key.key_scopes]  # given to the key, taken away by the role since
    if taken:
        raise HTTPException(status.HTTP_403_FORBIDDEN, _refusal(key, taken[0], request))
    route = f"{request.method} {request.url.path}"
    wanted = " or ".join(repr(scope.value) for scope in needed)
    held = ", ".join(sorted_scopes(key.scopes)) or "none"
    raise HTTPException(
        status.HTTP_403_FORBIDDEN,
        f"API key {key.prefix}... lacks scope {wanted}, which {route} needs; its scopes: {held}",
    )


def requires_any(*scopes: Scope) -> Any:
    """The declaration of a route that needs one of `scopes`, for `dependencies=[...]`."""
    return Security(authorize_any, scopes=[scope.value for scope in scopes])


AnyKey = Annotated[Caller, requires()]  # who am I, my own keys
ReadKey = Annotated[Caller, requires(Scope.READ)]
InferenceKey = Annotated[Caller, requires(Scope.INFERENCE)]
TrainKey = Annotated[Caller, requires(Scope.TRAIN)]
ModelsWriteKey = Annotated[Caller, requires(Scope.MODELS_WRITE)]
AdminKey = Annotated[Caller, requires(Scope.ADMIN)]
OperatorKey = Annotated[Caller, requires(Scope.OPERATOR)]  # the service's operators: organisations and quotas
# Training that registers a model under a name and moves its alias, as a sweep does with its best trial.
TrainAndModelsWriteKey = Annotated[Caller, requires(Scope.TRAIN, Scope.MODELS_WRITE)]
# A job's routes: `read` sees every job of the organisation, `train` alone the jobs the key submitted
# (app/services/job_visibility.py).
JobKey = Annotated[Caller, requires_any(Scope.READ, Scope.TRAIN)]


@dataclass(frozen=True)
class Requirement:
    """What a route declares: `scopes`, all needed, or one of them when `any_of` (none: any valid key)."""

    scopes: tuple[str, ...]
    any_of: bool = False

    def __str__(self) -> str:
        """What `x-required-scope` says: the scope, several with a space between (all) or `or` (one), or ANY_KEY."""
        return (" or " if self.any_of else " ").join(self.scopes) or ANY_KEY


def _declarations(dependant: Dependant) -> list[Requirement]:
    return [
        Requirement(tuple(d.own_oauth_scopes or []), d.call is authorize_any)
        for d in dependant.dependencies
        if d.call in (authorize, authorize_any)
    ]


def requirement(route: APIRoute, path: str = "") -> Requirement:
    """What `route` (at `path`, its prefixes applied) declares; ValueError if it has no declaration or several."""
    declared = _declarations(route.dependant)
    if len(declared) != 1:
        methods = ",".join(sorted(route.methods or ()))
        raise ValueError(
            f"route {methods} {path or route.path} ({route.name}) declares {len(declared)} scopes: declare "
            "exactly one, as `key: ReadKey` (app/api/scopes.py) or `dependencies=[requires(Scope...)]`"
        )
    return declared[0]


def required_scopes(route: APIRoute, path: str = "") -> tuple[str, ...]:
    """The scopes `route` declares (all needed, or one of them: `requirement(...).any_of`); none: any valid key."""
    return requirement(route, path).scopes


def required_scope(route: APIRoute, path: str = "") -> str:
    """What `x-required-scope` says of `route`: its scope, its scopes (`read train`, `read or train`), or ANY_KEY."""
    return str(requirement(route, path))


def _show_scopes(schema: dict[str, Any], alternatives: set[tuple[str, str]]) -> dict[str, Any]:
    """Each /v1 operation of an OpenAPI document with its scope as `x-required-scope` and a line of its description
    (what Swagger UI and ReDoc show), read from its bearer requirement. The operations in `alternatives` (path,
    method) need one of their scopes: their requirement becomes one per scope, which OpenAPI reads as either."""
    for path, operations in schema.get("paths", {}).items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in operations.items():
            if "x-required-scope" in operation:
                continue
            scopes = [scope for requirement in operation.get("security", []) for scope in requirement.get(BEARER, [])]
            named = [f"`{scope}`" for scope in scopes]
            if (path, method) in alternatives:
                operation["security"] = [{BEARER: [scope]} for scope in scopes]
                operation["x-required-scope"] = str(Requirement(tuple(scopes), any_of=True))
                line = f"Required scope: {' or '.join(named)}."
            else:
                operation["x-required-scope"] = " ".join(scopes) or ANY_KEY
                plural = "s" if len(scopes) > 1 else ""
                line = f"Required scope{plural}: {' and '.join(named)}." if scopes else NO_SCOPE_LINE
            operation["description"] = f"{line}\n\n{operation.get('description', '')}".strip()
    return schema


def declare_scopes(app: FastAPI) -> None:
    """Check that every /v1 route declares one scope (ValueError naming the first that does not), and show each in
    OpenAPI as the operation's `x-required-scope`."""
    alternatives: set[tuple[str, str]] = set()
    for context in iter_route_contexts(app.routes):
        route, path = context.original_route, context.path or ""
        if isinstance(route, APIRoute) and path.startswith("/v1/") and requirement(route, path).any_of:
            alternatives |= {(path, method.lower()) for method in route.methods or ()}
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        return app.openapi_schema or _show_scopes(generate(), alternatives)

    app.openapi = openapi  # type: ignore[method-assign]
