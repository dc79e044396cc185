"""owners api keys pings workers

Revision ID: 0001
Revises:
Create Date: 2026-11-21 23:19:31.953037
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('owners',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_owners')),
    sa.UniqueConstraint('name', name=op.f('uq_owners_name'))
    )
    op.create_table('workers',
    sa.Column('hostname', sa.String(length=255), nullable=False),
    sa.Column('queues', sa.String(length=255), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('started_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('hostname', name=op.f('pk_workers'))
    )
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_workers_last_seen_at'), ['last_seen_at'], unique=False)

    op.create_table('api_keys',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('last_used_at', app.db.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', app.db.base.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_api_keys_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_keys_key_hash'))
    )
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_keys_owner_id'), ['owner_id'], unique=False)

    op.create_table('pings',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('queue', sa.String(length=50), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('answered_at', app.db.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('worker', sa.String(length=255), nullable=True),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_pings_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pings'))
    )
    with op.batch_alter_table('pings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pings_owner_id'), ['owner_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('pings', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_pings_owner_id'))

    op.drop_table('pings')
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_keys_owner_id'))

    op.drop_table('api_keys')
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_workers_last_seen_at'))

    op.drop_table('workers')
    op.drop_table('owners')
