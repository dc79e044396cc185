"""dataset processing

A dataset is stored first and parsed by a worker afterwards: its status (processing -> ready | failed, with the
first bad line and why), how its file is compressed, where it was registered from (an object-store URI read in
place), the languages its sides are declared in, its data report, and for a filtered dataset its parent and the
rules with what each removed. Datasets already stored were validated on upload: they are ready.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 09:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('datasets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('status', sa.String(length=20), server_default='ready', nullable=False))
        batch_op.add_column(sa.Column('error', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('error_line', sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column('compression', sa.String(length=10), server_default='none', nullable=False))
        batch_op.add_column(sa.Column('source_uri', sa.String(length=1000), nullable=True))
        batch_op.add_column(sa.Column('source_language', sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column('target_language', sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column('report', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('parent_id', sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column('filter_rules', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('filter_counts', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('processed_at', app.db.base.UTCDateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f('ix_datasets_status'), ['status'], unique=False)
        batch_op.create_foreign_key(
            batch_op.f('fk_datasets_parent_id_datasets'), 'datasets', ['parent_id'], ['id'], ondelete='SET NULL'
        )


def downgrade() -> None:
    with op.batch_alter_table('datasets', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_datasets_parent_id_datasets'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_datasets_status'))
        for column in (
            'processed_at', 'filter_counts', 'filter_rules', 'parent_id', 'report', 'target_language',
            'source_language', 'source_uri', 'compression', 'error_line', 'error', 'status',
        ):
            batch_op.drop_column(column)
