"""key rate limit

A key's own requests per minute (PATCH /v1/keys/{id}), replacing the service's RATE_LIMIT_PER_MINUTE for that key
when set. Existing keys get none: the setting applies.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE on every database, as 0024 does for owners: no batch copy of api_keys on SQLite.
    op.add_column("api_keys", sa.Column("rate_limit_per_minute", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP COLUMN rate_limit_per_minute")  # SQLite 3.35+ and PostgreSQL alike
