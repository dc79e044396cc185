"""model imports

An imported model (POST /v1/models/import) has no job: models.job_id becomes nullable.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 04:24:28.359605
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.alter_column('job_id',
               existing_type=sa.VARCHAR(length=36),
               nullable=True)



def downgrade() -> None:
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.alter_column('job_id',
               existing_type=sa.VARCHAR(length=36),
               nullable=False)

