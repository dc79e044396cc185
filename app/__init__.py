"""The HTTP side of the service: settings, database, API routes and CLI. Never imports torch."""
