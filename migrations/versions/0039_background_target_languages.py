"""background work's target language

`target_language` and `zero_shot` on `evaluations`, `file_translations` and `dataset_translations`: for a model of
several pairs, the language its token asked for before each source (app/services/target_languages.py), and whether
the pair was one the model never trained on (null where the source language is not known). Null for a model of one
pair and for the rows from before.

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-01 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None

TABLES = ("evaluations", "file_translations", "dataset_translations")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("target_language", sa.String(length=20), nullable=True))
            batch_op.add_column(sa.Column("zero_shot", sa.Boolean(), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("zero_shot")
            batch_op.drop_column("target_language")
