"""corrections, datasets gathered from them, mixed fine-tuning

`corrections` (app/db/correction_tables.py): what people corrected in a model's translations, deleted with the
model or its owner. `datasets.lineage`: where a dataset the service made came from. `jobs.mix_dataset_id`,
`jobs.mix_share`: rows of another dataset mixed among the training rows; `jobs.register_as`: the name the job's
model is published under.

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-29 09:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "corrections",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("key_id", sa.String(length=36), nullable=False),
        sa.Column("key_prefix", sa.String(length=16), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("translation", sa.Text(), nullable=False),
        sa.Column("corrected", sa.Text(), nullable=False),
        sa.Column("created_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_corrections_owner_id_owners"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_corrections_model_id_models"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_corrections")),
    )
    with op.batch_alter_table("corrections", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_corrections_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_corrections_model_id"), ["model_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_corrections_created_at"), ["created_at"], unique=False)
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lineage", sa.JSON(), nullable=True))
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("mix_dataset_id", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("mix_share", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("register_as", sa.String(length=64), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_jobs_mix_dataset_id_datasets"), "datasets", ["mix_dataset_id"], ["id"], ondelete="SET NULL"
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_jobs_mix_dataset_id_datasets"), type_="foreignkey")
        batch_op.drop_column("register_as")
        batch_op.drop_column("mix_share")
        batch_op.drop_column("mix_dataset_id")
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_column("lineage")
    with op.batch_alter_table("corrections", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_corrections_created_at"))
        batch_op.drop_index(batch_op.f("ix_corrections_model_id"))
        batch_op.drop_index(batch_op.f("ix_corrections_owner_id"))
    op.drop_table("corrections")
