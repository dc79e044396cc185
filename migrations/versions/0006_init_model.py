"""init model

A job may start from an existing model's weights and tokenizer (jobs.init_model_id); the model it trains records
that parent (models.parent_model_id). Plain ids, not foreign keys: deleting a parent keeps its children's record.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 03:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('init_model_id', sa.String(length=36), nullable=True))
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_model_id', sa.String(length=36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.drop_column('parent_model_id')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('init_model_id')
