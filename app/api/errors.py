"""HTTP errors in the shapes the API uses everywhere."""

from __future__ import annotations

from fastapi import HTTPException, Request, status
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.routing import Match


def not_found(kind: str, object_id: str) -> HTTPException:
    """404 that reveals nothing about whether the object exists for someone else."""
    return HTTPException(status.HTTP_404_NOT_FOUND, f"{kind} {object_id} not found")


def unprocessable(field: str, message: str) -> HTTPException:
    """422 in FastAPI's validation-error shape, naming the field (dotted path inside the body)."""
    loc = ["body", *field.split(".")] if field else ["body"]
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [{"loc": loc, "msg": message, "type": "value_error"}])


def bad_query(parameter: str, message: str) -> HTTPException:
    """422 in FastAPI's validation-error shape for a query parameter that parsed but makes no sense."""
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT, [{"loc": ["query", parameter], "msg": message, "type": "value_error"}]
    )


def conflict(message: str) -> HTTPException:
    return HTTPException(status.HTTP_409_CONFLICT, message)


BACKEND_RETRY_SECONDS = 10


def backend_failed(backend: str, model_id: str, reason: str) -> HTTPException:
    """503 for a decoding backend (pytorch, ctranslate2) that broke on a request it had accepted: not the
    caller's fault, so a retry (or the other backend) may serve it. The worker's own answer has the same words."""
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        f"inference backend {backend!r} failed on model {model_id}: {reason}",
        headers={"Retry-After": str(BACKEND_RETRY_SECONDS)},
    )


async def method_not_allowed(request: Request, _exc: Exception) -> JSONResponse:
    """405 whose `Allow` lists the methods of every route on the path (Starlette names only the first route's).
    A path that is a route of its own (/v1/models/import) is not also an `{id}` (/v1/models/{model_id}): when a
    route without parameters matches, only such routes count."""
    matching = [r for r in iter_route_contexts(request.app.routes) if r.matches(request.scope)[0] != Match.NONE]
    literal = [r for r in matching if "{" not in getattr(r, "path", "{")]
    allowed: set[str] = set()
    for route in literal or matching:
        allowed |= getattr(route, "methods", None) or set()
    return JSONResponse(
        {"detail": "Method Not Allowed"},
        status.HTTP_405_METHOD_NOT_ALLOWED,
        headers={"Allow": ", ".join(sorted(allowed))},
    )
