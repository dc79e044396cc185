"""job languages

What a job translates from and to (BCP 47), given at submission or taken from the model it starts from; the model
it publishes carries them (trained_models.source_language / target_language, set by its owner before).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25 20:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_language", sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column("target_language", sa.String(length=20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("target_language")
        batch_op.drop_column("source_language")
