"""Scopes: every /v1 route declares the one it needs, OpenAPI shows it, and the authorization matrix holds.

The matrix is generated from `app.routes`: every /v1 route is called by a key holding a single scope (one key per
scope; `operator`'s is an operator's, the others an organisation's) and by a key holding every organisation scope. A
route declaring scope S answers 403 naming S to every key without it, and anything but 403 to every key with it; one
declaring several (POST /v1/sweeps: train and models:write) answers 403 naming the first the key lacks. Path
parameters are ids that exist nowhere and bodies are left out, so the calls that pass the scope check stop at 404 or
422: the point is the authorization layer, not the routes' work.
"""

from __future__ import annotations

import re

import pytest
from fastapi import APIRouter, FastAPI

from app.api.scopes import ANY_KEY, declare_scopes, required_scope, required_scopes, requirement
from app.core.scopes import ALL_SCOPES, ORGANISATION_SCOPES, Scope
from tests.security.conftest import bearer
from tests.security.test_object_authorization import v1_routes

NOWHERE = "00000000-0000-0000-0000-000000000000"
KEY_SETS = {scope.value: [scope.value] for scope in ALL_SCOPES} | {"all": [s.value for s in ORGANISATION_SCOPES]}
ORGANISATION_KEY_SETS = {name: scopes for name, scopes in KEY_SETS.items() if name != "operator"}


@pytest.fixture
def pg_env() -> dict[str, str]:
    return {"RATE_LIMIT_PER_MINUTE": "0"}  # the matrix calls every route with one key


def _key(owner: str, scopes: list[str]) -> dict[str, str]:
    """A key of organisation `owner` holding `scopes`; scope operator alone: an operator's key (of the operators' own
    organisation: no organisation's key may hold it)."""
    from app.db.keys import create_key
    from app.db.operators import create_operator_key
    from app.db.session import session_scope

    with session_scope() as session:
        if scopes == ["operator"]:
            _row, clear = create_operator_key(session, f"{owner}-operator")
        else:
            _row, clear = create_key(session, f"{owner}-{'-'.join(scopes)}", owner, scopes=scopes)
    return {"Authorization": f"Bearer {clear}"}


def test_every_v1_route_declares_exactly_one_scope():
    from app.main import app

    routes = v1_routes(app)
    assert len(routes) > 60
    declared = {(method, path): required_scope(route, path) for method, path, route in routes}
    scopes = {(method, path): required_scopes(route, path) for method, path, route in routes}
    either = {(method, path) for method, path, route in routes if requirement(route, path).any_of}
    assert {scope for each in scopes.values() for scope in each} <= {s.value for s in ALL_SCOPES}
    # One route needs two scopes: a sweep trains, and registers its best model (name@best) at the end.
    assert {k: v for k, v in scopes.items() if len(v) > 1 and k not in either} == {
        ("POST", "/v1/sweeps"): ("train", "models:write")
    }
    # Reading a job takes `read`, or `train` for the jobs the key submitted: every GET of /v1/jobs, and nothing else.
    assert either == {(m, p) for m, p in declared if m == "GET" and p.startswith("/v1/jobs")} and len(either) == 10
    assert {declared[k] for k in either} == {"read or train"}
    # The routes any valid key may call are few, and each is about the key itself.
    assert {k for k, v in declared.items() if v == ANY_KEY} == {
        ("GET", "/v1/me"),
        ("GET", "/v1/keys"),
        ("POST", "/v1/keys"),
        ("DELETE", "/v1/keys/{key_id}"),
    }
    # The operators' routes, and they alone, need `operator`.
    operator = {path for (_method, path), v in declared.items() if v == "operator"}
    assert operator == {path for _method, path in declared if path.startswith("/v1/operator/")} and len(operator) == 3
    # Reading needs `read`, but for the organisation's settings (admin) and what runs a model (inference).
    not_read = {k: v for k, v in declared.items() if k[0] == "GET" and v not in ("read", "read or train", ANY_KEY)}
    admin_only = ("/v1/members", "/v1/webhooks", "/v1/audit", "/v1/operator/")
    assert {path for _method, path in not_read if not path.startswith(admin_only)} == {
        "/v1/models/{model_id}/neighbors",
        "/v1/models/{model_id}/geometry",
    }
    # Where the organisation's datasets may be registered from: any reader sees it, only an admin narrows it.
    assert declared[("GET", "/v1/organisation/dataset-uri-prefixes")] == "read"
    assert declared[("PUT", "/v1/organisation/dataset-uri-prefixes")] == "admin"


def test_an_app_with_an_undeclared_v1_route_does_not_start():
    router = APIRouter(prefix="/v1")

    @router.get("/forgotten")
    def forgotten() -> dict[str, str]:
        return {}

    app = FastAPI()
    app.include_router(router)
    with pytest.raises(ValueError, match=r"GET /v1/forgotten \(forgotten\) declares 0 scopes"):
        declare_scopes(app)


def test_openapi_shows_each_routes_scope(pg_client):
    paths = pg_client.get("/openapi.json").json()["paths"]
    operations = [(p, m, op) for p, ops in paths.items() if p.startswith("/v1/") for m, op in ops.items()]
    assert operations
    for path, method, operation in operations:
        scope = operation["x-required-scope"]
        if " or " in scope:  # one of them: a requirement each, which OpenAPI reads as alternatives
            assert operation["security"] == [{"HTTPBearer": [s]} for s in scope.split(" or ")], (method, path)
        else:
            assert operation["security"] == [{"HTTPBearer": [] if scope == ANY_KEY else scope.split(" ")}], path
        assert operation["description"].startswith(("Required scope:", "Required scopes:")), (method, path)
    job = paths["/v1/jobs/{job_id}"]["get"]
    assert job["x-required-scope"] == "read or train"
    assert job["description"].startswith("Required scope: `read` or `train`.")
    assert paths["/v1/jobs"]["post"]["x-required-scope"] == "train"
    assert paths["/v1/models/{model_id}/translate"]["post"]["x-required-scope"] == "inference"
    assert paths["/v1/models/{model_id}"]["delete"]["x-required-scope"] == "models:write"
    assert paths["/v1/members"]["get"]["x-required-scope"] == "admin"
    sweeps = paths["/v1/sweeps"]["post"]
    assert sweeps["x-required-scope"] == "train models:write"
    assert sweeps["description"].startswith("Required scopes: `train` and `models:write`.")


@pytest.mark.parametrize("held", sorted(KEY_SETS))
def test_authorization_matrix(pg_client, held):
    """Fault: a key holding only `held` (or every scope) calls every /v1 route. Pass: 403 naming the route's scope
    exactly where the key lacks it."""
    headers = _key("acme", KEY_SETS[held])
    wrong = []
    for method, path, route in v1_routes(pg_client.app):
        needed = requirement(route, path)
        lacking = [scope for scope in needed.scopes if scope not in KEY_SETS[held]]
        if needed.any_of and len(lacking) < len(needed.scopes):
            lacking = []  # one of them held
        wanted = " or ".join(map(repr, lacking)) if needed.any_of else repr(lacking[0]) if lacking else ""
        url = re.sub(r"\{\w+\}", NOWHERE, path)
        response = pg_client.request(method, url, headers=headers)
        if not lacking and response.status_code == 403:
            wrong.append(f"{method} {path} refused {held}: {response.text}")
        elif lacking:
            detail = response.json().get("detail", "") if response.status_code == 403 else ""
            if f"lacks scope {wanted}, which {method} {url} needs; its scopes: {', '.join(KEY_SETS[held])}" not in str(
                detail
            ):
                wrong.append(f"{method} {path} ({lacking}) answered {response.status_code} {response.text}")
    assert not wrong, "\n".join(wrong)


def test_a_refusal_names_the_scope_and_the_keys_scopes(pg_client):
    headers = _key("acme", ["read", "inference"])
    response = pg_client.post("/v1/jobs", headers=headers, json={})
    assert response.status_code == 403
    prefix = headers["Authorization"].removeprefix("Bearer ")[:10]
    assert response.json() == {
        "detail": f"API key {prefix}... lacks scope 'train', which POST /v1/jobs needs; its scopes: read, inference"
    }


def test_scopes_are_checked_before_the_body(pg_client):
    """A key without the scope learns nothing about what the route would accept."""
    response = pg_client.post("/v1/models/import", headers=_key("acme", ["read"]), files={"nope": ("x", b"x")})
    assert response.status_code == 403 and "models:write" in response.text


def test_a_key_with_every_scope_is_the_default(pg_client):
    me = pg_client.get("/v1/me", headers=bearer("alice")).json()
    assert me["scopes"] == me["key_scopes"] == [s.value for s in ORGANISATION_SCOPES]
    assert (me["organisation"], me["member"], me["role"]) == ("alice", "alice", "admin")


def test_role_scopes_are_a_chain():
    from app.core.scopes import ROLE_SCOPES, Role

    assert ROLE_SCOPES[Role.VIEWER] == {Scope.READ}
    assert ROLE_SCOPES[Role.VIEWER] < ROLE_SCOPES[Role.MEMBER] < ROLE_SCOPES[Role.ADMIN] == set(ORGANISATION_SCOPES)
    assert Scope.ADMIN not in ROLE_SCOPES[Role.MEMBER]
    # An operator's role allows the service's scope, nothing of an organisation's; no organisation role allows it.
    assert ROLE_SCOPES[Role.OPERATOR] == {Scope.OPERATOR} == set(ALL_SCOPES) - set(ORGANISATION_SCOPES)


@pytest.mark.parametrize("role", ["viewer", "member", "admin"])
def test_authorization_matrix_by_role(pg_client, role):
    """Fault: a key given every scope while its member was an admin, whose member is then made a `role`, calls every
    /v1 route. Pass: 403 saying the member's role exactly where the role does not allow the route's scope."""
    from app.core.scopes import ROLE_SCOPES, Role
    from app.db.access_tables import Member
    from app.db.keys import create_key
    from app.db.session import session_scope

    with session_scope() as session:
        row, clear = create_key(session, f"{role}-key", "roles", member_name=f"m-{role}", scopes=list(KEY_SETS["all"]))
        session.get(Member, row.member_id).role = role  # before the key's first request: nothing cached yet
    headers = {"Authorization": f"Bearer {clear}"}
    allows = {scope.value for scope in ROLE_SCOPES[Role(role)]}
    wrong = []
    for method, path, route in v1_routes(pg_client.app):
        needed = required_scopes(route, path)
        response = pg_client.request(method, re.sub(r"\{\w+\}", NOWHERE, path), headers=headers)
        if set(needed) <= allows or (requirement(route, path).any_of and set(needed) & allows):
            if response.status_code == 403:
                wrong.append(f"{method} {path} refused a {role}: {response.text}")
        elif needed == ("operator",):  # never given to the key: no organisation role allows it
            if response.status_code != 403 or "lacks scope 'operator'" not in response.text:
                wrong.append(f"{method} {path} ({needed}) answered a {role} {response.status_code} {response.text}")
        elif response.status_code != 403 or f"is now a {role}, whose keys may use only" not in response.text:
            wrong.append(f"{method} {path} ({needed}) answered a {role} {response.status_code} {response.text}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("held", sorted(ORGANISATION_KEY_SETS))
def test_revocation_matrix(pg_client, held):
    """Fault: a key holding only `held` revokes keys of its own member holding more (a read-only key, the admin key).
    Pass: with scope admin it revokes any; without, exactly the keys whose scopes it holds too, and 403 naming the
    scopes it lacks for the others, which go on working."""
    from app.db.keys import find_key
    from app.db.session import session_scope

    headers = _key("acme", KEY_SETS[held])
    prefix = headers["Authorization"].removeprefix("Bearer ")[:10]
    wrong = []
    for target, scopes in sorted(ORGANISATION_KEY_SETS.items()):
        victim = _key("acme", scopes)  # the same member's: another member's keys are 404 to a non-admin
        with session_scope() as session:
            row = find_key(session, victim["Authorization"].removeprefix("Bearer "))
        response = pg_client.delete(f"/v1/keys/{row.id}", headers=headers)
        lacking = [scope for scope in scopes if scope not in KEY_SETS[held]]
        if "admin" in KEY_SETS[held] or not lacking:
            if response.status_code != 200:
                wrong.append(f"{held} revoking {target}: {response.status_code} {response.text}")
            continue
        expected = f"API key {prefix}... cannot revoke key {row.prefix}... ({row.name!r}), which holds scopes it lacks "
        if response.status_code != 403 or not response.json()["detail"].startswith(
            f"{expected}itself: {', '.join(lacking)};"
        ):
            wrong.append(f"{held} revoking {target}: {response.status_code} {response.text}")
        if pg_client.get("/v1/me", headers=victim).status_code != 200:
            wrong.append(f"{held} revoked {target} although refused")
    assert not wrong, "\n".join(wrong)
