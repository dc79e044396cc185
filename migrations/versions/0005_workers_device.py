"""workers device

Each worker's heartbeat records the device it computes on (cpu or cuda), its name and its memory, so the API,
the dashboard and the memory check of a job know what the workers can run.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 23:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('device_kind', sa.String(length=10), nullable=True))
        batch_op.add_column(sa.Column('device_name', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('device_memory_total', sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column('device_memory_free', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.drop_column('device_memory_free')
        batch_op.drop_column('device_memory_total')
        batch_op.drop_column('device_name')
        batch_op.drop_column('device_kind')
