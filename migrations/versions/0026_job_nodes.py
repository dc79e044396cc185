"""job nodes

The hosts of a multi-host job's attempt (training.nodes > 1): node 0 is the worker that claimed the job, the others
joined through a join task (worker/tasks/training_node.py).

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-27 15:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_nodes",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("node_rank", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=False),
        sa.Column("joined_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("left_at", app.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_nodes_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "attempt", "node_rank", name=op.f("pk_job_nodes")),
    )


def downgrade() -> None:
    op.drop_table("job_nodes")
