"""deleted job usage

Deleting a job no longer gives its worker minutes back: the run of a deleted job (start, end, devices x nodes) is
kept in `deleted_job_usage`, which the daily worker-minutes quota counts beside the jobs that remain.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deleted_job_usage",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("started_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("processes", sa.Integer(), nullable=False),
        sa.Column("deleted_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_deleted_job_usage_owner_id_owners"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deleted_job_usage")),
    )
    with op.batch_alter_table("deleted_job_usage", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_deleted_job_usage_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_deleted_job_usage_finished_at"), ["finished_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("deleted_job_usage", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deleted_job_usage_finished_at"))
        batch_op.drop_index(batch_op.f("ix_deleted_job_usage_owner_id"))
    op.drop_table("deleted_job_usage")
