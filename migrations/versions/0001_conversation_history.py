"""conversation history and summaries

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
LongText = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql")
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def upgrade() -> None:
    op.create_table(
        "conversation_message",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(128), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("name", sa.String(255)),
        sa.Column("content", LongText, nullable=False),
        sa.Column("tool_calls", sa.Text),
        sa.Column("tool_call_id", sa.String(255)),
        sa.Column("origin_conversation_id", sa.String(255)),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("ingested_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_conversation_message"),
        sa.UniqueConstraint("tenant_id", "event_id", name="uq_conversation_message_tenant_id_event_id"),
        mysql_charset="utf8mb4",
    )
    op.create_index(
        "ix_conversation_message_tenant_id_conversation_id_id",
        "conversation_message",
        ["tenant_id", "conversation_id", "id"],
    )
    op.create_table(
        "conversation_summary",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("summary", LongText, nullable=False),
        sa.Column("covered_until_id", sa.BigInteger, nullable=False),
        sa.Column("covered_count", sa.Integer, nullable=False),
        sa.Column("token_count", sa.Integer, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "conversation_id", name="pk_conversation_summary"),
        mysql_charset="utf8mb4",
    )


def downgrade() -> None:
    op.drop_table("conversation_summary")
    op.drop_index("ix_conversation_message_tenant_id_conversation_id_id", "conversation_message")
    op.drop_table("conversation_message")
