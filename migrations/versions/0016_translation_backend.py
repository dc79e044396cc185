"""translation backend

Which backend (pytorch, ctranslate2) translated an evaluation's test set or a file: CTranslate2 became the
default where it serves the model, and its output may differ slightly from PyTorch's, so scores are compared
within one backend. Null until the row succeeds, and for rows from before.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLES = ("evaluations", "file_translations")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("backend", sa.String(length=20), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("backend")
