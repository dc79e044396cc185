"""background work's sends

`attempt` on `evaluations`, `file_translations` and `dataset_translations`: how many times the row's task was sent
(1 when queued). The reaper sends a running row whose progress stalled again (its worker died) and fails it after
BACKGROUND_MAX_ATTEMPTS sends (worker/reaper.py).

Revision ID: 0037
Revises: 0036
Create Date: 2026-11-29 19:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

TABLES = ("evaluations", "file_translations", "dataset_translations")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("attempt", sa.Integer(), server_default="1", nullable=False))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("attempt")
