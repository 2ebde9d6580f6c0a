"""memories record which kinds of sensitive content were masked in them

Consolidation screens what it stores for sensitive content and may replace a
span with a typed placeholder (``[CARD]``); ``memory`` and
``consolidation_candidate`` get ``masked``: the kinds whose spans were
replaced, comma-separated (never the text). Earlier rows were not screened:
NULL.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-11
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

TABLES = ("memory", "consolidation_candidate")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("masked", sa.String(128), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("masked")
