"""stale-history marks: conversations whose Redis list may miss stored messages

Written when a Redis write fails after the batch was stored in the database,
deleted once the list was dropped or rebuilt; a restarted worker and every
reader honour them (streams/session/stale.py).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def BinaryKey(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
    )


def upgrade() -> None:
    op.create_table(
        "stale_history_mark",
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("conversation_id", BinaryKey(255), nullable=False),
        sa.Column("mark_id", sa.BigInteger, nullable=False),
        sa.Column("marked_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "conversation_id", name="pk_stale_history_mark"),
        mysql_charset="utf8mb4",
    )


def downgrade() -> None:
    op.drop_table("stale_history_mark")
