"""sweeps

Hyperparameter sweeps: a sweep's search space, objective and budget; its Optuna study as a journal of operations
(sweep_journal, replayed in order by app/services/sweep_journal.py), so the study lives in the service's own
database and goes with its sweep (ON DELETE CASCADE); and each trial as an ordinary job that names its sweep and
its trial number (a job outlives a deleted sweep: SET NULL).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 22:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('sweeps',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('key_id', sa.String(length=36), nullable=False),
    sa.Column('key_prefix', sa.String(length=16), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('objective', sa.String(length=20), nullable=False),
    sa.Column('job_config', sa.JSON(), nullable=False),
    sa.Column('space', sa.JSON(), nullable=False),
    sa.Column('metric', sa.String(length=50), nullable=False),
    sa.Column('direction', sa.String(length=10), nullable=False),
    sa.Column('budget_minutes', sa.Float(), nullable=True),
    sa.Column('budget_trials', sa.Integer(), nullable=True),
    sa.Column('max_concurrent', sa.Integer(), nullable=False),
    sa.Column('sampler', sa.String(length=20), nullable=False),
    sa.Column('pruner', sa.String(length=20), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('resource', sa.String(length=10), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('stop_reason', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('best_job_id', sa.String(length=36), nullable=True),
    sa.Column('best_model_id', sa.String(length=36), nullable=True),
    sa.Column('importance', sa.JSON(), nullable=True),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('idempotency_key', sa.String(length=255), nullable=True),
    sa.Column('request_sha256', sa.String(length=64), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('finished_at', app.db.base.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_sweeps_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sweeps')),
    sa.UniqueConstraint('owner_id', 'idempotency_key', name=op.f('uq_sweeps_owner_id_idempotency_key'))
    )
    with op.batch_alter_table('sweeps', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sweeps_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_sweeps_status'), ['status'], unique=False)

    op.create_table('sweep_journal',
    sa.Column('sweep_id', sa.String(length=36), nullable=False),
    sa.Column('seq', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('entry', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['sweep_id'], ['sweeps.id'], name=op.f('fk_sweep_journal_sweep_id_sweeps'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('sweep_id', 'seq', name=op.f('pk_sweep_journal'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sweep_id', sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column('trial_number', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_jobs_sweep_id'), ['sweep_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_jobs_sweep_id_sweeps'), 'sweeps', ['sweep_id'], ['id'], ondelete='SET NULL')


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_jobs_sweep_id_sweeps'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_jobs_sweep_id'))
        batch_op.drop_column('trial_number')
        batch_op.drop_column('sweep_id')
    op.drop_table('sweep_journal')
    with op.batch_alter_table('sweeps', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sweeps_status'))
        batch_op.drop_index(batch_op.f('ix_sweeps_owner_id'))
    op.drop_table('sweeps')
