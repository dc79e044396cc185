"""evaluations

A model scored on a test set (BLEU, chrF, chrF++ with sacrebleu signatures, the hypotheses in the artifact
store) by an inference-queue task; a job may name a test set (jobs.test_dataset_id) scored when it succeeds.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 04:03:05.941136
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('evaluations',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('model_id', sa.String(length=36), nullable=False),
    sa.Column('dataset_id', sa.String(length=36), nullable=True),
    sa.Column('job_id', sa.String(length=36), nullable=True),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('sentences', sa.Integer(), nullable=False),
    sa.Column('translated', sa.Integer(), nullable=False),
    sa.Column('scores', sa.JSON(), nullable=True),
    sa.Column('hypotheses_key', sa.String(length=500), nullable=True),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('started_at', app.db.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('finished_at', app.db.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('updated_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_evaluations_dataset_id_datasets'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_evaluations_model_id_models'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_evaluations_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_evaluations'))
    )
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_evaluations_dataset_id'), ['dataset_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_evaluations_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_evaluations_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_evaluations_status'), ['status'], unique=False)

    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('test_dataset_id', sa.String(length=36), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_jobs_test_dataset_id_datasets'), 'datasets', ['test_dataset_id'], ['id'], ondelete='SET NULL')



def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_jobs_test_dataset_id_datasets'), type_='foreignkey')
        batch_op.drop_column('test_dataset_id')

    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_evaluations_status'))
        batch_op.drop_index(batch_op.f('ix_evaluations_owner_id'))
        batch_op.drop_index(batch_op.f('ix_evaluations_model_id'))
        batch_op.drop_index(batch_op.f('ix_evaluations_dataset_id'))

    op.drop_table('evaluations')
