"""dataset translations

`dataset_translations` (app/db/dataset_translation_tables.py): a dataset's text translated by a model into a new
parallel dataset, deleted with the model, the dataset or their owner.

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-29 12:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dataset_translations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("dataset_id", sa.String(length=36), nullable=False),
        sa.Column("output_dataset_id", sa.String(length=36), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("sentences", sa.Integer(), nullable=False),
        sa.Column("translated", sa.Integer(), nullable=False),
        sa.Column("resumed_from", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(length=20), nullable=True),
        sa.Column("created_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("started_at", app.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", app.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("updated_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_dataset_translations_owner_id_owners"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_dataset_translations_model_id_models"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_dataset_translations_dataset_id_datasets"),
            ondelete="CASCADE",
        ),  # fmt: skip
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_translations")),
    )
    with op.batch_alter_table("dataset_translations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dataset_translations_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dataset_translations_model_id"), ["model_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dataset_translations_dataset_id"), ["dataset_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dataset_translations_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dataset_translations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dataset_translations_status"))
        batch_op.drop_index(batch_op.f("ix_dataset_translations_dataset_id"))
        batch_op.drop_index(batch_op.f("ix_dataset_translations_model_id"))
        batch_op.drop_index(batch_op.f("ix_dataset_translations_owner_id"))
    op.drop_table("dataset_translations")
