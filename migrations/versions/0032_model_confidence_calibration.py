"""model confidence calibration

A model trained by a job records the low-confidence threshold calibrated on its validation pairs
(`models.confidence_calibration`: threshold, sentences, flagged share, the mean chrF of the flagged and of the
others, the rank correlation of confidence with chrF; model/decode/calibration.py). Models stored before, and
imported ones, have none: their translations carry a confidence but no flag.

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-29 06:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("models", sa.Column("confidence_calibration", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE models DROP COLUMN confidence_calibration")  # SQLite 3.35+ and PostgreSQL alike
