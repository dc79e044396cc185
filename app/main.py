"""The FastAPI application."""

from __future__ import annotations

from fastapi import FastAPI

from app.api import dashboard, datasets, estimate, health, inference, jobs, models, pings
from app.api.limits import BodySizeLimit


def create_app() -> FastAPI:
    app = FastAPI(
        title="Transformer service",
        version="0.1.0",
        description="Train and serve the encoder-decoder Transformer of 'Attention Is All You Need'.",
    )
    app.include_router(health.router)
    app.include_router(pings.router)
    app.include_router(datasets.router)
    app.include_router(jobs.router)
    app.include_router(models.router)
    app.include_router(inference.router)
    app.include_router(estimate.router)
    app.include_router(dashboard.router)
    app.add_middleware(BodySizeLimit)
    return app


app = create_app()
