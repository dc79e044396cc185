"""The FastAPI application."""

from __future__ import annotations

from fastapi import FastAPI

from app.api import health, pings


def create_app() -> FastAPI:
    app = FastAPI(
        title="Transformer service",
        version="0.1.0",
        description="Train and serve the encoder-decoder Transformer of 'Attention Is All You Need'.",
    )
    app.include_router(health.router)
    app.include_router(pings.router)
    return app


app = create_app()
