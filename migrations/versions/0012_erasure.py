"""erasure: who was erased and up to where, what went, the fences passed

``erasure`` keeps every erasure request (who, the event-time cutoff and the
chat-topic offsets, never what); ``erasure_count`` what went from each store;
``erasure_fence`` the ingest partitions that took the erasure in;
``erasure_conversation`` the conversations an erasure in progress touches. Messages
get an index on ``created_at`` for the retention runs, and ``origin_conversation_id``
(a sub-agent conversation, which an erasure may name) is compared exactly, as
every other id (0010).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from streams.adapters.db.schema.conversation import ExactKey, exact_collation

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _origin_collation(collation: str | None) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "mysql":
        collate = f" COLLATE {collation}" if collation else ""
        op.execute("ALTER TABLE conversation_message MODIFY origin_conversation_id "
                   f"VARCHAR(255) CHARACTER SET utf8mb4{collate} NULL")


def upgrade() -> None:
    _origin_collation(exact_collation(op.get_bind().dialect))
    op.create_index("ix_conversation_message_created_at", "conversation_message",
                    ["created_at"])
    op.create_table(
        "erasure",
        sa.Column("seq", BigId, autoincrement=True, nullable=False),
        sa.Column("erasure_id", ExactKey(64), nullable=False),
        sa.Column("tenant_id", ExactKey(64), nullable=False),
        sa.Column("target", sa.String(16), nullable=False),
        sa.Column("subject", ExactKey(255), nullable=False),
        sa.Column("reference", sa.String(128), nullable=True),
        sa.Column("cutoff", Timestamp, nullable=False),
        sa.Column("chat_offsets", sa.Text(), nullable=False),
        sa.Column("memory_cube", ExactKey(255), nullable=True),
        sa.Column("memory_user_id", ExactKey(255), nullable=True),
        sa.Column("memory_sources", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("requested_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.Column("finished_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_erasure"),
        sa.UniqueConstraint("tenant_id", "erasure_id", name="uq_erasure_tenant_id_erasure_id"),
    )
    op.create_index("ix_erasure_tenant_id_target_subject", "erasure",
                    ["tenant_id", "target", "subject"])
    op.create_table(
        "erasure_count",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("store", sa.String(64), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("seq", "store", name="pk_erasure_count"),
    )
    op.create_table(
        "erasure_fence",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("passed_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("seq", "partition", name="pk_erasure_fence"),
    )
    op.create_table(
        "erasure_conversation",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("conversation_id", ExactKey(255), nullable=False),
        sa.Column("whole", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("seq", "conversation_id", name="pk_erasure_conversation"),
    )


def downgrade() -> None:
    op.drop_table("erasure_conversation")
    op.drop_table("erasure_fence")
    op.drop_table("erasure_count")
    op.drop_index("ix_erasure_tenant_id_target_subject", table_name="erasure")
    op.drop_table("erasure")
    op.drop_index("ix_conversation_message_created_at", table_name="conversation_message")
    _origin_collation(None)
