"""Every /v1 route that is not a GET either records an audit event or is listed as exempt, with why
(app/api/audit_actions.py): a new route that changes state cannot be added without deciding what its row says."""

from __future__ import annotations

from fastapi.routing import APIRoute, iter_route_contexts

from app.api.audit_actions import AUDITED, EXEMPT
from app.main import create_app


def _changing_routes() -> set[tuple[str, str]]:
    found = set()
    for context in iter_route_contexts(create_app().routes):
        route, path = context.original_route, context.path or ""
        if isinstance(route, APIRoute) and path.startswith("/v1/"):
            found |= {(method, path) for method in route.methods or () if method not in {"GET", "HEAD", "OPTIONS"}}
    return found


def test_every_route_that_is_not_a_get_is_audited_or_exempt_with_a_reason():
    routes = _changing_routes()
    undecided = sorted(routes - AUDITED.keys() - EXEMPT.keys())
    assert not undecided, f"add these to AUDITED or EXEMPT in app/api/audit_actions.py: {undecided}"
    assert not AUDITED.keys() & EXEMPT.keys()
    assert all(reason.strip() for reason in EXEMPT.values())


def test_the_tables_name_no_route_that_does_not_exist():
    routes = _changing_routes()
    assert sorted((AUDITED.keys() | EXEMPT.keys()) - routes) == []
