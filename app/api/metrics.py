"""GET /metrics: the Prometheus text format, for a scraper holding `METRICS_TOKEN` (see app/core/observability.py)."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.exposition import choose_encoder

from app.api.deps import SettingsDep
from app.core.observability import scrape_registry

router = APIRouter(tags=["metrics"])
_bearer = HTTPBearer(auto_error=False, description="The value of METRICS_TOKEN")


def require_metrics_token(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    if not settings.metrics_token.get_secret_value():
        raise HTTPException(status.HTTP_404_NOT_FOUND, "metrics are disabled; set METRICS_TOKEN")
    unauthorized = {"WWW-Authenticate": "Bearer"}
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer token (METRICS_TOKEN)", headers=unauthorized)
    if not hmac.compare_digest(credentials.credentials.encode(), settings.metrics_token.get_secret_value().encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong metrics token (METRICS_TOKEN)", headers=unauthorized)


@router.get(
    "/metrics",
    response_class=Response,
    dependencies=[Depends(require_metrics_token)],
    responses={
        200: {"content": {CONTENT_TYPE_PLAIN_0_0_4: {}}, "description": "Prometheus text format"},
        401: {"description": "Missing or wrong METRICS_TOKEN"},
        404: {"description": "Metrics are disabled (METRICS_TOKEN unset)"},
    },
)
def metrics(request: Request) -> Response:
    encode, content_type = choose_encoder(request.headers.get("accept", ""))  # OpenMetrics when the scraper asks
    return Response(encode(scrape_registry()), headers={"Content-Type": content_type})
