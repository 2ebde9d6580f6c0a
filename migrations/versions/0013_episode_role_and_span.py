"""episodes keep their message's role, passages their place in the message

An assistant's long message is kept as passages (each an episodic memory):
``memory`` and ``consolidation_candidate`` get the ``role`` of the message an
episode was made from and, for a passage, its character offsets in that
message's content (``span_start``, ``span_end``). All NULL on earlier rows:
an episode of unknown role, a whole message.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TABLES = ("memory", "consolidation_candidate")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("role", sa.String(16), nullable=True))
            batch.add_column(sa.Column("span_start", sa.Integer(), nullable=True))
            batch.add_column(sa.Column("span_end", sa.Integer(), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("span_end")
            batch.drop_column("span_start")
            batch.drop_column("role")
