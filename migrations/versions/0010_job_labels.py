"""job labels

A job's name, note and tags, for telling experiments apart (PATCH /v1/jobs/{id}, GET /v1/jobs?tag=, compare).

The tags are rows of a small table job_tags (job_id, tag, position), primary key (job_id, tag), indexed by tag,
rather than a JSON list on jobs: "jobs with tag t" is then plain SQL (EXISTS on job_tags) that SQLite and
PostgreSQL run alike, so GET /v1/jobs filters, counts and pages in the database. A JSON column would need a
dialect's own operators (json_each on SQLite, jsonb @> on PostgreSQL) or a filter in Python after paging, which
gives wrong totals and short pages. `position` keeps the order the tags were given in; the primary key keeps a
job from holding a tag twice.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 13:31:49.669991
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('job_tags',
    sa.Column('job_id', sa.String(length=36), nullable=False),
    sa.Column('tag', sa.String(length=64), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_tags_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'tag', name=op.f('pk_job_tags'))
    )
    with op.batch_alter_table('job_tags', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_job_tags_tag'), ['tag'], unique=False)

    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('name', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('note', sa.Text(), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('note')
        batch_op.drop_column('name')

    with op.batch_alter_table('job_tags', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_job_tags_tag'))

    op.drop_table('job_tags')
