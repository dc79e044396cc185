"""organisation uri prefixes

An organisation's own object-store prefixes its datasets may be registered from, within the service's
DATASET_URI_PREFIXES (its admins narrow that list for it). Existing organisations get none: all of
DATASET_URI_PREFIXES applies, as before.

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-28 12:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE on every database: a batch copy of owners on SQLite would cascade-delete its keys.
    op.add_column("owners", sa.Column("dataset_uri_prefixes", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE owners DROP COLUMN dataset_uri_prefixes")  # SQLite 3.35+ and PostgreSQL alike
