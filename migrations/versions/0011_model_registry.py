"""model registry

A model's registered name, version, description, languages and tags, and aliases that point `name@alias` at
one version (PATCH /v1/models/{id}, PUT/DELETE /v1/models/{name}/aliases/{alias}).

- models gains name and version (unique per owner together), description, source_language, target_language;
  all nullable, so every existing model stays unregistered.
- model_names (owner_id, name, last_version) hands out versions: a number is never given twice, even after the
  latest version is deleted or renamed.
- model_tags as job_tags (0010): plain SQL for GET /v1/models?tag=.
- model_aliases (owner_id, name, alias) -> model_id, removed with the model (ON DELETE CASCADE).
- model_alias_events: every move (from, to, which key, when), with plain ids so it outlives models and keys.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 16:15:17.669743
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('model_alias_events',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('alias', sa.String(length=64), nullable=False),
    sa.Column('from_model_id', sa.String(length=36), nullable=True),
    sa.Column('from_version', sa.Integer(), nullable=True),
    sa.Column('to_model_id', sa.String(length=36), nullable=True),
    sa.Column('to_version', sa.Integer(), nullable=True),
    sa.Column('key_id', sa.String(length=36), nullable=False),
    sa.Column('key_prefix', sa.String(length=16), nullable=False),
    sa.Column('created_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_model_alias_events_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_model_alias_events'))
    )
    with op.batch_alter_table('model_alias_events', schema=None) as batch_op:
        batch_op.create_index('ix_model_alias_events_owner_id_name_alias', ['owner_id', 'name', 'alias'], unique=False)

    op.create_table('model_names',
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('last_version', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_model_names_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('owner_id', 'name', name=op.f('pk_model_names'))
    )
    op.create_table('model_aliases',
    sa.Column('owner_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('alias', sa.String(length=64), nullable=False),
    sa.Column('model_id', sa.String(length=36), nullable=False),
    sa.Column('updated_at', app.db.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_model_aliases_model_id_models'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_model_aliases_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('owner_id', 'name', 'alias', name=op.f('pk_model_aliases'))
    )
    with op.batch_alter_table('model_aliases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_aliases_model_id'), ['model_id'], unique=False)

    op.create_table('model_tags',
    sa.Column('model_id', sa.String(length=36), nullable=False),
    sa.Column('tag', sa.String(length=64), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_model_tags_model_id_models'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id', 'tag', name=op.f('pk_model_tags'))
    )
    with op.batch_alter_table('model_tags', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_tags_tag'), ['tag'], unique=False)

    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.add_column(sa.Column('name', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('version', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('description', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('source_language', sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column('target_language', sa.String(length=20), nullable=True))
        batch_op.create_unique_constraint(batch_op.f('uq_models_owner_id_name_version'), ['owner_id', 'name', 'version'])



def downgrade() -> None:
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('uq_models_owner_id_name_version'), type_='unique')
        batch_op.drop_column('target_language')
        batch_op.drop_column('source_language')
        batch_op.drop_column('description')
        batch_op.drop_column('version')
        batch_op.drop_column('name')

    with op.batch_alter_table('model_tags', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_tags_tag'))

    op.drop_table('model_tags')
    with op.batch_alter_table('model_aliases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_aliases_model_id'))

    op.drop_table('model_aliases')
    op.drop_table('model_names')
    with op.batch_alter_table('model_alias_events', schema=None) as batch_op:
        batch_op.drop_index('ix_model_alias_events_owner_id_name_alias')

    op.drop_table('model_alias_events')
