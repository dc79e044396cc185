"""a model's language pairs

`pairs` on `models`: the language pairs of a model of several ([[source, target], ...], in its job's order), kept
with the model so that it keeps translating into the target asked for once its job is deleted (the job's
`job_pairs` rows go with the job). Filled from `job_pairs` for the models trained before; null for a model of one
pair.

Revision ID: 0040
Revises: 0039
Create Date: 2026-12-01 12:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0040"
down_revision = "0039"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pairs", sa.JSON(), nullable=True))
    connection = op.get_bind()
    rows = connection.execute(
        sa.text(
            "SELECT m.id, p.source_language, p.target_language FROM models m "
            "JOIN job_pairs p ON p.job_id = m.job_id ORDER BY m.id, p.position"
        )
    ).all()
    pairs: dict[str, list[list[str]]] = {}
    for model_id, source, target in rows:
        pairs.setdefault(model_id, []).append([source, target])
    models = sa.table("models", sa.column("id", sa.String), sa.column("pairs", sa.JSON))
    for model_id, value in pairs.items():
        connection.execute(models.update().where(models.c.id == model_id).values(pairs=value))


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_column("pairs")
