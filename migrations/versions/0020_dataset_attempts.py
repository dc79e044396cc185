"""dataset attempts

A dataset's parse is sent again when it stays processing too long (its worker died, or its message was lost), and
failed after a number of sends: how many times its task was sent, and when last (none yet: since it was created).
Datasets already stored were sent once.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 12:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('datasets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('attempt', sa.Integer(), server_default='1', nullable=False))
        batch_op.add_column(sa.Column('dispatched_at', app.db.base.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('datasets', schema=None) as batch_op:
        batch_op.drop_column('dispatched_at')
        batch_op.drop_column('attempt')
