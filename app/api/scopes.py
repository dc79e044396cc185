"""Authorization: every /v1 route declares the scope it needs, once, in its signature.

A route takes its key as one of the aliases below (`key: TrainKey`), or, if it has no use for the key, declares
`dependencies=[requires(Scope.READ)]`. Either is FastAPI's `Security(authorize, scopes=[...])`, so OpenAPI shows
the scope on the operation's bearer requirement (`{"HTTPBearer": ["train"]}`, as OpenAPI 3.1 allows for any scheme),
and `declare_scopes(app)` (run by the app factory) refuses to build an app with a /v1 route that declares none, or
two, and copies each one into the operation as `x-required-scope`. Forgetting is a startup error, not an open route.
One declaration may name several scopes, all needed (POST /v1/sweeps: `train` to run its trials, `models:write` to
register the best one); `x-required-scope` then lists them with a space between, as OAuth writes a set of scopes.

A key missing a scope gets 403 naming the first it lacks and what the key holds; every authorized request counts
against the key's rate (app/api/ratelimit.py).
"""

from __future__ import annotations

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


AnyKey = Annotated[Caller, requires()]  # who am I, my own keys
ReadKey = Annotated[Caller, requires(Scope.READ)]
InferenceKey = Annotated[Caller, requires(Scope.INFERENCE)]
TrainKey = Annotated[Caller, requires(Scope.TRAIN)]
ModelsWriteKey = Annotated[Caller, requires(Scope.MODELS_WRITE)]
AdminKey = Annotated[Caller, requires(Scope.ADMIN)]
OperatorKey = Annotated[Caller, requires(Scope.OPERATOR)]  # the service's operators: organisations and quotas
# Training that registers a model under a name and moves its alias, as a sweep does with its best trial.
TrainAndModelsWriteKey = Annotated[Caller, requires(Scope.TRAIN, Scope.MODELS_WRITE)]


def _declarations(dependant: Dependant) -> list[list[str]]:
    return [list(d.own_oauth_scopes or []) for d in dependant.dependencies if d.call is authorize]


def required_scopes(route: APIRoute, path: str = "") -> tuple[str, ...]:
    """The scopes `route` (at `path`, its prefixes applied) declares, all needed (none: any valid key); ValueError if
    it has no declaration or several."""
    declared = _declarations(route.dependant)
    if len(declared) != 1:
        methods = ",".join(sorted(route.methods or ()))
        raise ValueError(
            f"route {methods} {path or route.path} ({route.name}) declares {len(declared)} scopes: declare "
            "exactly one, as `key: ReadKey` (app/api/scopes.py) or `dependencies=[requires(Scope...)]`"
        )
    return tuple(declared[0])


def required_scope(route: APIRoute, path: str = "") -> str:
    """What `x-required-scope` says of `route`: its scope, its scopes with a space between, or ANY_KEY."""
    return " ".join(required_scopes(route, path)) or ANY_KEY


def _show_scopes(schema: dict[str, Any]) -> dict[str, Any]:
    """Each /v1 operation of an OpenAPI document with its scope as `x-required-scope` and a line of its description
    (what Swagger UI and ReDoc show), read from its bearer requirement."""
    for path, operations in schema.get("paths", {}).items():
        if not path.startswith("/v1/"):
            continue
        for operation in operations.values():
            if "x-required-scope" in operation:
                continue
            scopes = [scope for requirement in operation.get("security", []) for scope in requirement.get(BEARER, [])]
            operation["x-required-scope"] = " ".join(scopes) or ANY_KEY
            named = " and ".join(f"`{scope}`" for scope in scopes)
            line = f"Required scope{'s' if len(scopes) > 1 else ''}: {named}." if scopes else NO_SCOPE_LINE
            operation["description"] = f"{line}\n\n{operation.get('description', '')}".strip()
    return schema


def declare_scopes(app: FastAPI) -> None:
    """Check that every /v1 route declares one scope (ValueError naming the first that does not), and show each in
    OpenAPI as the operation's `x-required-scope`."""
    for context in iter_route_contexts(app.routes):
        route, path = context.original_route, context.path or ""
        if isinstance(route, APIRoute) and path.startswith("/v1/"):
            required_scope(route, path)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        return app.openapi_schema or _show_scopes(generate())

    app.openapi = openapi  # type: ignore[method-assign]
