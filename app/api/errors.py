"""HTTP errors in the shapes the API uses everywhere."""

from __future__ import annotations

from fastapi import HTTPException, status


def not_found(kind: str, object_id: str) -> HTTPException:
    """404 that reveals nothing about whether the object exists for someone else."""
    return HTTPException(status.HTTP_404_NOT_FOUND, f"{kind} {object_id} not found")


def unprocessable(field: str, message: str) -> HTTPException:
    """422 in FastAPI's validation-error shape, naming the field (dotted path inside the body)."""
    loc = ["body", *field.split(".")] if field else ["body"]
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                         [{"loc": loc, "msg": message, "type": "value_error"}])


def conflict(message: str) -> HTTPException:
    return HTTPException(status.HTTP_409_CONFLICT, message)
