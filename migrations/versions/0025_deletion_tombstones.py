"""deletion tombstones

Deleting a job, a model or a dataset records the artifact-store prefixes its files live under as tombstones, in the
same transaction as the rows; the collector (worker/tasks/collect.py) deletes the files once the grace period has
passed. A model outlives the job that trained it and a filtered dataset its parent: `models.job_id` and
`datasets.parent_id` keep the id of a deleted row (no foreign key), so the lineage can say it was deleted.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27 12:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifact_tombstones",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("object_id", sa.String(length=36), nullable=False),
        sa.Column("prefix", sa.String(length=500), nullable=False),
        sa.Column("deleted_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifact_tombstones")),
    )
    with op.batch_alter_table("artifact_tombstones", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_artifact_tombstones_deleted_at"), ["deleted_at"], unique=False)

    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_models_job_id_jobs"), type_="foreignkey")

    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_datasets_parent_id_datasets"), type_="foreignkey")


def downgrade() -> None:
    connection = op.get_bind()
    # Ids of deleted rows cannot satisfy the foreign keys again: the lineage forgets them, as it did before.
    connection.execute(
        sa.text(
            "UPDATE datasets SET parent_id = NULL WHERE parent_id IS NOT NULL"
            " AND parent_id NOT IN (SELECT id FROM datasets)"
        )
    )
    connection.execute(
        sa.text("UPDATE models SET job_id = NULL WHERE job_id IS NOT NULL AND job_id NOT IN (SELECT id FROM jobs)")
    )
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.create_foreign_key(
            batch_op.f("fk_datasets_parent_id_datasets"), "datasets", ["parent_id"], ["id"], ondelete="SET NULL"
        )

    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.create_foreign_key(batch_op.f("fk_models_job_id_jobs"), "jobs", ["job_id"], ["id"], ondelete="CASCADE")

    with op.batch_alter_table("artifact_tombstones", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_artifact_tombstones_deleted_at"))

    op.drop_table("artifact_tombstones")
