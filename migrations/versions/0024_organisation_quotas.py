"""organisation quotas

An organisation's own quotas, each replacing the service's QUOTA_* setting when set (0: unlimited): gigabytes
stored, jobs queued or running, worker minutes per UTC day. Existing organisations get none: the settings apply.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27 13:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


COLUMNS = ('quota_storage_gb', 'quota_active_jobs', 'quota_worker_minutes_per_day')


def upgrade() -> None:
    # Plain ALTER TABLE on every database: a batch copy of owners on SQLite would cascade-delete its keys.
    op.add_column('owners', sa.Column('quota_storage_gb', sa.Float(), nullable=True))
    op.add_column('owners', sa.Column('quota_active_jobs', sa.Integer(), nullable=True))
    op.add_column('owners', sa.Column('quota_worker_minutes_per_day', sa.Integer(), nullable=True))


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.execute(f'ALTER TABLE owners DROP COLUMN {column}')  # SQLite 3.35+ and PostgreSQL alike
