"""Celery workers: they train and serve the model (model/) and record everything in the database."""
