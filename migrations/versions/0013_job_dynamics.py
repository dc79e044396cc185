"""job dynamics

The training dynamics of a job. kind "weights" (model/dynamics.py): at step 1 and every training.dynamics_every
updates, the gradient norm, weight norm and update-to-weight ratio of each W_Q, W_K, W_V, W_O, W_1, W_2,
LayerNorm and the embedding, per layer. kind "attention" (model/attention_stats.py): at every evaluation, each
head's entropy and shares of weight on the diagonal, previous, first and end-of-sentence token. One row per
(job, kind, step) holding the group list and one JSON list per statistic: a record is always written and read
whole (GET /v1/jobs/{id}/dynamics), about 3 x 70 numbers for `small`, so a row of JSON costs one insert where one
row per number would cost two hundred.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25 16:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('job_dynamics',
    sa.Column('job_id', sa.String(length=36), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('step', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('groups', sa.JSON(), nullable=False),
    sa.Column('values', sa.JSON(), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_dynamics_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'kind', 'step', name=op.f('pk_job_dynamics'))
    )


def downgrade() -> None:
    op.drop_table('job_dynamics')
