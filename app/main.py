"""The FastAPI application: its routers, its middleware, and the HTTP answer to every service error."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.api import (
    audit_log,
    corrections,
    dashboard,
    dataset_translations,
    datasets,
    estimate,
    evaluations,
    exports,
    file_translations,
    glossaries,
    health,
    inference,
    job_comparison,
    job_deletion,
    job_dynamics,
    job_events,
    job_logs,
    job_memory,
    jobs,
    keys,
    me,
    members,
    metrics,
    model_aliases,
    model_imports,
    model_names,
    models,
    operator,
    organisation,
    pings,
    pipelines,
    sweeps,
    usage,
    webhooks,
    workers,
)
from app.api.errors import method_not_allowed, unreadable_body
from app.api.http_metrics import HttpMetrics
from app.api.limits import BodySizeLimit
from app.api.nul_guard import NulGuard
from app.api.ratelimit import KEYED  # API key required (401), requests per minute per key (429)
from app.api.request_id import RequestId
from app.api.scopes import declare_scopes  # every /v1 route declares its scope (403), or the app does not start
from app.core import logs
from app.core.settings import get_settings
from app.services.errors import ServiceError


async def service_error(_request: Request, exc: Exception) -> JSONResponse:
    """The one place a service's refusal or failure (app/services/errors.py) becomes an HTTP answer: its status,
    `{"detail": ...}` and headers, the answer an HTTPException with the same fields gets."""
    assert isinstance(exc, ServiceError), exc  # registered for ServiceError and its subclasses only
    return JSONResponse({"detail": exc.detail}, exc.status, headers=exc.headers)


def create_app() -> FastAPI:
    logs.configure(get_settings())  # JSON lines with the request's ids; keys redacted from every line
    app = FastAPI(
        title="Transformer service",
        version="0.1.0",
        description="Train and serve the encoder-decoder Transformer of 'Attention Is All You Need'.",
        exception_handlers={400: unreadable_body, 405: method_not_allowed, ServiceError: service_error},
    )
    app.include_router(health.router)
    app.include_router(me.router, **KEYED)
    app.include_router(keys.router, **KEYED)
    app.include_router(members.router, **KEYED)
    app.include_router(audit_log.router, **KEYED)
    app.include_router(usage.router, **KEYED)
    app.include_router(organisation.router, **KEYED)
    app.include_router(operator.router, **KEYED)
    app.include_router(pings.router, **KEYED)
    app.include_router(datasets.router, **KEYED)
    app.include_router(job_comparison.router, **KEYED)  # before jobs: /v1/jobs/compare is not an id
    app.include_router(jobs.router, **KEYED)
    app.include_router(job_deletion.router, **KEYED)
    app.include_router(sweeps.router, **KEYED)
    app.include_router(pipelines.router, **KEYED)
    app.include_router(job_events.router, **KEYED)
    app.include_router(job_dynamics.router, **KEYED)
    app.include_router(job_logs.router, **KEYED)
    app.include_router(job_memory.router, **KEYED)
    app.include_router(model_imports.router, **KEYED)  # before models: /v1/models/import is not an id
    app.include_router(models.router, **KEYED)
    app.include_router(model_aliases.router, **KEYED)
    app.include_router(model_names.router, **KEYED)
    app.include_router(exports.router, **KEYED)
    app.include_router(evaluations.router, **KEYED)
    app.include_router(file_translations.router, **KEYED)
    app.include_router(dataset_translations.router, **KEYED)
    app.include_router(inference.router, **KEYED)
    app.include_router(estimate.router, **KEYED)
    app.include_router(workers.router, **KEYED)
    app.include_router(webhooks.router, **KEYED)
    app.include_router(glossaries.router, **KEYED)
    app.include_router(corrections.router, **KEYED)
    app.include_router(dashboard.router)
    app.include_router(metrics.router)
    declare_scopes(app)
    app.add_middleware(BodySizeLimit)
    app.add_middleware(NulGuard)  # a NUL in the URL: 422 naming the parameter
    app.add_middleware(RequestId)  # before the limits: a refused request still has its id
    app.add_middleware(HttpMetrics)  # added last: outermost, so refused requests are counted too
    return app


app = create_app()
