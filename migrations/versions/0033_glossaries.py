"""glossaries

An organisation's glossaries (`glossaries`): a name, a language pair, a case rule and the [source, target] terms
(app/db/glossary_tables.py), deleted with their owner.

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-29 06:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "glossaries",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source_language", sa.String(length=20), nullable=False),
        sa.Column("target_language", sa.String(length=20), nullable=False),
        sa.Column("case_sensitive", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("entries", sa.JSON(), nullable=False),
        sa.Column("created_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_glossaries_owner_id_owners"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_glossaries")),
    )
    with op.batch_alter_table("glossaries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_glossaries_owner_id"), ["owner_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("glossaries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_glossaries_owner_id"))
    op.drop_table("glossaries")
