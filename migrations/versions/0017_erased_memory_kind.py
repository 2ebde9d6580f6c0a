"""an erased memory's kind and span: the other memories of its message are kept

A memory erasure keeps, beside the memory's cube, user and source events, its
kind (``memory_kind``: fact or episode) and, for a passage, its offsets in its
message (``span_start``, ``span_end``), so a consolidation or a reprocess of
the same messages leaves out that memory and writes the others judged from
them. Erasures recorded before have no kind and keep out every memory of their
cube and user judged from their events, as they did.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("erasure") as batch:
        batch.add_column(sa.Column("memory_kind", sa.String(8), nullable=True))
        batch.add_column(sa.Column("span_start", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("span_end", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("erasure") as batch:
        batch.drop_column("span_end")
        batch.drop_column("span_start")
        batch.drop_column("memory_kind")
