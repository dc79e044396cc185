"""file translations

A text file translated in the background by an inference worker (POST /v1/models/{id}/translations).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 04:44:36.814061
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('file_translations',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('model_id', sa.String(length=36), nullable=False),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('lines', sa.Integer(), nullable=False),
    sa.Column('sentences', sa.Integer(), nullable=False),
    sa.Column('translated', sa.Integer(), nullable=False),
    sa.Column('source_key', sa.String(length=500), nullable=False),
    sa.Column('result_key', sa.String(length=500), nullable=True),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('started_at', app.db.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('finished_at', app.db.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('updated_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_file_translations_model_id_models'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_file_translations_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_file_translations'))
    )
    with op.batch_alter_table('file_translations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_file_translations_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_file_translations_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_file_translations_status'), ['status'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('file_translations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_file_translations_status'))
        batch_op.drop_index(batch_op.f('ix_file_translations_owner_id'))
        batch_op.drop_index(batch_op.f('ix_file_translations_model_id'))

    op.drop_table('file_translations')
