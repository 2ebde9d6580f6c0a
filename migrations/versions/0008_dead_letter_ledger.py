"""dead letters published, by the record they stand for

A redelivered record (a worker killed after its dead letter went out, before
the offset was committed) is not dead-lettered twice.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def BinaryKey(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
    )


def upgrade() -> None:
    op.create_table(
        "dead_letter_ledger",
        sa.Column("source_topic", BinaryKey(249), nullable=False),
        sa.Column("source_partition", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("source_offset", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("dlq_partition", sa.Integer, nullable=False),
        sa.Column("sent", sa.Integer, nullable=False),
        sa.Column("recorded_at", Timestamp, nullable=False),
        sa.Column("recorded_by", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("source_topic", "source_partition", "source_offset",
                                name="pk_dead_letter_ledger"),
        mysql_charset="utf8mb4",
    )
    op.create_index("ix_dead_letter_ledger_recorded_at", "dead_letter_ledger", ["recorded_at"])


def downgrade() -> None:
    op.drop_index("ix_dead_letter_ledger_recorded_at", table_name="dead_letter_ledger")
    op.drop_table("dead_letter_ledger")
