"""a session consolidated in bounded parts: where each part's claim stopped

A run claims at most ``MEMSTREAM_CONSOLIDATION__MAX_MESSAGES`` messages (and
``__MAX_BYTES`` of text) of its session; the rest is taken by the next part's
run. ``consolidation_run`` records the last message each run's claim went
through (``claimed_until_id``) and whether the session has messages after it
(``has_more``). Runs claimed before are whole sessions: nothing after them.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("consolidation_run") as batch:
        batch.add_column(sa.Column("claimed_until_id", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("has_more", sa.Boolean(), nullable=False,
                                   server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("consolidation_run") as batch:
        batch.drop_column("has_more")
        batch.drop_column("claimed_until_id")
