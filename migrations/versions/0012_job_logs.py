"""job logs

What a worker logged about each training job (data statistics, settings chosen, resumes, checkpoints,
evaluations, warnings, the traceback of a failure), for GET /v1/jobs/{id}/logs and the job page.

One row per line, numbered per job by `seq` (unique with job_id, which also indexes a job's lines in order), so a
client follows a log with `after=<seq>`. A job keeps its newest lines only (worker/job_log.py bounds them), so the
table stays small; its rows go with their job (ON DELETE CASCADE).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25 16:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('job_logs',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('job_id', sa.String(length=36), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=True),
    sa.Column('level', sa.String(length=10), nullable=False),
    sa.Column('logger', sa.String(length=100), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_logs_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job_logs')),
    sa.UniqueConstraint('job_id', 'seq', name=op.f('uq_job_logs_job_id_seq'))
    )


def downgrade() -> None:
    op.drop_table('job_logs')
