"""organisation members

Owners become organisations with members: a member has a name and a role (viewer, member, admin), and an API key
belongs to a member, with the scopes it holds and when it expires. Every existing owner gets one admin member named
after it, and every existing key (revoked ones too) is attached to that member with all scopes: nothing a key could
do before is lost.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27 12:00:00.000000
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None

# The scopes and role as this revision knows them (app/core/scopes.py may grow later; a migration does not move).
ALL_SCOPES = ['read', 'inference', 'train', 'models:write', 'admin']

_owners = sa.table('owners', sa.column('id', sa.String), sa.column('name', sa.String),
                   sa.column('created_at', app.db.base.UTCDateTime(timezone=True)))
_members = sa.table('members', sa.column('id', sa.String), sa.column('owner_id', sa.String),
                    sa.column('name', sa.String), sa.column('role', sa.String),
                    sa.column('created_at', app.db.base.UTCDateTime(timezone=True)))
_keys = sa.table('api_keys', sa.column('owner_id', sa.String), sa.column('member_id', sa.String),
                 sa.column('scopes', sa.JSON))


def upgrade() -> None:
    op.create_table('members',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('role', sa.String(length=20), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_members_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_members')),
    sa.UniqueConstraint('owner_id', 'name', name=op.f('uq_members_owner_id_name'))
    )
    with op.batch_alter_table('members', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_members_owner_id'), ['owner_id'], unique=False)

    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.add_column(sa.Column('member_id', sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column('scopes', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('expires_at', app.db.base.UTCDateTime(timezone=True), nullable=True))

    connection = op.get_bind()
    owners = connection.execute(sa.select(_owners.c.id, _owners.c.name, _owners.c.created_at)).all()
    for owner_id, name, created_at in owners:
        member_id = str(uuid.uuid4())
        connection.execute(
            _members.insert().values(id=member_id, owner_id=owner_id, name=name[:100], role='admin',
                                     created_at=created_at)
        )
        connection.execute(
            _keys.update().where(_keys.c.owner_id == owner_id).values(member_id=member_id, scopes=ALL_SCOPES)
        )

    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.alter_column('member_id', existing_type=sa.String(length=36), nullable=False)
        batch_op.alter_column('scopes', existing_type=sa.JSON(), nullable=False)
        batch_op.create_index(batch_op.f('ix_api_keys_member_id'), ['member_id'], unique=False)
        batch_op.create_foreign_key(
            batch_op.f('fk_api_keys_member_id_members'), 'members', ['member_id'], ['id'], ondelete='CASCADE'
        )


def downgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_api_keys_member_id_members'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_api_keys_member_id'))
        batch_op.drop_column('expires_at')
        batch_op.drop_column('scopes')
        batch_op.drop_column('member_id')

    with op.batch_alter_table('members', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_members_owner_id'))

    op.drop_table('members')
