"""a model's default beam

`beam_size` on `models`: the beam a translation, a translated file or an evaluation of the model decodes with when
the request names none, as its owner (or a distillation pipeline, for its student) set it; null: the service's
default, 4. Null for every model before.

Revision ID: 0041
Revises: 0040
Create Date: 2026-12-02 13:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0041"
down_revision = "0040"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.add_column(sa.Column("beam_size", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_column("beam_size")
