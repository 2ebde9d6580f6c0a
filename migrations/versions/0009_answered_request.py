"""queries answered, durably

The record of answered requests in Redis is lost when Redis restarts empty; a
request delivered again after its worker died must still not be answered twice.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def BinaryKey(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
    )


def upgrade() -> None:
    op.create_table(
        "answered_request",
        sa.Column("request_key", BinaryKey(64), nullable=False),
        sa.Column("answered_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("request_key"),
    )
    op.create_index("ix_answered_request_answered_at", "answered_request", ["answered_at"])


def downgrade() -> None:
    op.drop_index("ix_answered_request_answered_at", table_name="answered_request")
    op.drop_table("answered_request")
