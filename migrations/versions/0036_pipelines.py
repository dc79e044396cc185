"""pipelines

`pipelines` (app/db/pipeline_tables.py): back-translation and distillation carried out as chains of jobs, dataset
translations and filtered datasets, deleted with their owner.

Revision ID: 0036
Revises: 0035
Create Date: 2026-11-29 13:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pipelines",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("key_id", sa.String(length=36), nullable=False),
        sa.Column("key_prefix", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=30), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("model_id", sa.String(length=36), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", app.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_pipelines_owner_id_owners"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pipelines")),
    )
    with op.batch_alter_table("pipelines", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pipelines_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_pipelines_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("pipelines", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pipelines_status"))
        batch_op.drop_index(batch_op.f("ix_pipelines_owner_id"))
    op.drop_table("pipelines")
