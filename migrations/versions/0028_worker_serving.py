"""worker serving

An inference worker's heartbeat records what it serves: the models loaded in its process (those it loads at start,
INFERENCE_WARM_MODELS, pinned), what `backend: auto` means on it and why, and the warm models it could not load.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("serving", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("serving")
