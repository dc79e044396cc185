"""job submitting key

A job records the API key that submitted it (`jobs.key_id`; a sweep's trial, the sweep's key), so that a key with
scope train but not read reads the jobs it submitted, and only those. Jobs stored before are given the key the audit
trail names for their submission (`job.submitted`), a sweep's trials their sweep's; the rest keep null, seen only by
keys with scope read.

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-28 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE on every database, as 0027 does for api_keys: no batch copy of jobs on SQLite.
    op.add_column("jobs", sa.Column("key_id", sa.String(length=36), nullable=True))
    op.create_index(op.f("ix_jobs_key_id"), "jobs", ["key_id"], unique=False)
    op.execute(
        "UPDATE jobs SET key_id = (SELECT MIN(a.key_id) FROM audit_events a WHERE a.owner_id = jobs.owner_id "
        "AND a.action = 'job.submitted' AND a.object_kind = 'job' AND a.object_id = jobs.id)"
    )
    op.execute(
        "UPDATE jobs SET key_id = (SELECT s.key_id FROM sweeps s WHERE s.id = jobs.sweep_id) "
        "WHERE key_id IS NULL AND sweep_id IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_jobs_key_id"), table_name="jobs")
    op.execute("ALTER TABLE jobs DROP COLUMN key_id")  # SQLite 3.35+ and PostgreSQL alike
