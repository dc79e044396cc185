"""jobs auto_settings

A job that gives max_minutes and leaves out the vocabulary, batch size, warm-up or step limit gets them
chosen by its worker from the corpus and the measured throughput; what was chosen, and why, is kept here.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 01:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('auto_settings', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('auto_settings')
