"""HTTP errors in the shapes the API uses everywhere."""

from __future__ import annotations

from fastapi import HTTPException, Request, status
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.routing import Match

from app.services.errors import InvalidField, validation_detail


def not_found(kind: str, object_id: str) -> HTTPException:
    """404 that reveals nothing about whether the object exists for someone else."""
    return HTTPException(status.HTTP_404_NOT_FOUND, f"{kind} {object_id} not found")


def unprocessable(field: str, message: str) -> HTTPException:
    """422 in FastAPI's validation-error shape, naming the field (dotted path inside the body): the body a
    service's InvalidField gets."""
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, InvalidField(field, message).detail)


def bad_query(parameter: str, message: str) -> HTTPException:
    """422 in FastAPI's validation-error shape for a query parameter that parsed but makes no sense."""
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, validation_detail(["query", parameter], message))


def conflict(message: str) -> HTTPException:
    return HTTPException(status.HTTP_409_CONFLICT, message)


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


async def unreadable_body(_request: Request, exc: Exception) -> JSONResponse:
    """FastAPI answers 400 "There was an error parsing the body" for a body it cannot decode at all (JSON that is not
    UTF-8 text, a broken multipart form); the API never sends 400 itself. It becomes the 422 every other bad body
    gets, naming the body and why."""
    detail = getattr(exc, "detail", None) or "the body could not be read"
    message = f"{detail}: a JSON body must be UTF-8 text, a form must be well-formed multipart or urlencoded"
    return JSONResponse({"detail": validation_detail(["body"], message)}, status.HTTP_422_UNPROCESSABLE_CONTENT)
