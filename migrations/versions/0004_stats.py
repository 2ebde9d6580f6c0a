"""stats API: the memory search log and the indexes of the stats queries

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def BinaryKey(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
    )


# name, table, columns: the same as streams/adapters/db/schema/stats.py
INDEXES = [
    ("ix_conversation_message_tenant_id_created_at_conversation_id", "conversation_message",
     ["tenant_id", "created_at", "conversation_id"]),
    ("ix_conversation_message_tenant_id_agent_id_created_at", "conversation_message",
     ["tenant_id", "agent_id", "created_at"]),
    ("ix_memory_tenant_id_type_scope_kind_valid_to", "memory",
     ["tenant_id", "type", "scope", "kind", "valid_to"]),
    ("ix_memory_tenant_id_cube_type_valid_to_superseded_by", "memory",
     ["tenant_id", "cube", "type", "valid_to", "superseded_by"]),
    ("ix_memory_tenant_id_cube_created_at", "memory", ["tenant_id", "cube", "created_at"]),
    ("ix_memory_tenant_id_agent_id_valid_to", "memory", ["tenant_id", "agent_id", "valid_to"]),
    ("ix_memory_tenant_id_created_at", "memory", ["tenant_id", "created_at"]),
]


def upgrade() -> None:
    op.create_table(
        "memory_search_log",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("results", sa.Integer, nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("keyword_only", sa.Boolean, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memory_search_log"),
        mysql_charset="utf8mb4",
    )
    op.create_index("ix_memory_search_log_tenant_id_created_at", "memory_search_log",
                    ["tenant_id", "created_at"])
    op.create_index("ix_memory_search_log_created_at", "memory_search_log", ["created_at"])
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in reversed(INDEXES):
        op.drop_index(name, table)
    op.drop_index("ix_memory_search_log_created_at", "memory_search_log")
    op.drop_index("ix_memory_search_log_tenant_id_created_at", "memory_search_log")
    op.drop_table("memory_search_log")
