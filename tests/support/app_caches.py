"""The app's cached settings, engines and clients, forgotten between tests that change the environment."""

from __future__ import annotations


def reset_caches() -> None:
    """Forget cached settings, engines and the Celery sender, so new environment variables apply."""
    from app.api import ttl_cache
    from app.artifacts import get_store
    from app.core.settings import get_settings
    from app.db import session
    from app.services import inference_limits
    from app.services.queueing import get_sender
    from app.services.webhooks import drain

    drain()  # a message the webhook sender is sending reads the settings: not while they change
    if session.get_engine.cache_info().currsize:
        session.get_engine().dispose()
    for cached in (get_settings, session.get_engine, session.get_sessionmaker, get_sender, get_store):
        cached.cache_clear()
    ttl_cache.clear()
    inference_limits.forget()
