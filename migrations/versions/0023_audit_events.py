"""audit events

The audit trail: one row per change of state made through the API (who: the key's id, name and prefix and its
member, copied; when; what: the action, the object's kind and id, a small JSON of details; from where: the request id
and the client's address). Rows go with their organisation (ON DELETE CASCADE) and with nothing else: they outlive the
keys, members and objects they speak of.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27 12:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import app.db.base


revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("created_at", app.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(length=60), nullable=False),
        sa.Column("object_kind", sa.String(length=30), nullable=False),
        sa.Column("object_id", sa.String(length=300), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("key_id", sa.String(length=36), nullable=True),
        sa.Column("key_name", sa.String(length=100), nullable=True),
        sa.Column("key_prefix", sa.String(length=20), nullable=True),
        sa.Column("member_id", sa.String(length=36), nullable=True),
        sa.Column("member_name", sa.String(length=100), nullable=True),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("client", sa.String(length=100), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_audit_events_owner_id_owners"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index("ix_audit_events_owner_id_created_at", "audit_events", ["owner_id", "created_at"], unique=False)
    op.create_index("ix_audit_events_owner_id_object_id", "audit_events", ["owner_id", "object_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_audit_events_owner_id_object_id", table_name="audit_events")
    op.drop_index("ix_audit_events_owner_id_created_at", table_name="audit_events")
    op.drop_table("audit_events")
