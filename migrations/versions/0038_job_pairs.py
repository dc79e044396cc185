"""job pairs

`job_pairs`: the language pairs of a job that trains one model for several, each a dataset and its declared languages
(model/data/language_pairs.py).

Revision ID: 0038
Revises: 0037
Create Date: 2026-11-30 03:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_pairs",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.String(length=36), nullable=True),
        sa.Column("source_language", sa.String(length=20), nullable=False),
        sa.Column("target_language", sa.String(length=20), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_pairs_job_id_jobs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_job_pairs_dataset_id_datasets"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("job_id", "position", name=op.f("pk_job_pairs")),
    )
    with op.batch_alter_table("job_pairs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_pairs_dataset_id"), ["dataset_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("job_pairs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_pairs_dataset_id"))
    op.drop_table("job_pairs")
