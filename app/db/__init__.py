"""Database layer shared by the API and the workers: tables, sessions, repository functions."""
