"""job memory

The memory of one training step of a job, measured by the worker once, before its first step
(model/memory_profile.py): peak bytes by kind (weights, gradients, Adam moments, saved activations by component,
temporary buffers) next to model/anatomy.py's estimate. A table of its own rather than a column on jobs: the
report (about 1 kB of JSON) is read by GET /v1/jobs/{id}/memory alone, and every listing of jobs would carry it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25 17:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('job_memory',
    sa.Column('job_id', sa.String(length=36), nullable=False),
    sa.Column('report', sa.JSON(), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_memory_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', name=op.f('pk_job_memory'))
    )


def downgrade() -> None:
    op.drop_table('job_memory')
