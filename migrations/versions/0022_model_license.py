"""model license

The licence a model's owner gives it (an SPDX identifier such as apache-2.0, or "other"): the model card of its
exports says it. None until set.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27 12:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.add_column(sa.Column('license', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.drop_column('license')
