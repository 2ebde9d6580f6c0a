"""long-term memories of the built-in provider: rows, inverted index, scope stats, vectors

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
LongText = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql")
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def BinaryKey(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
    )


def upgrade() -> None:
    op.create_table(
        "memory_scope_stats",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("cube", BinaryKey(255), nullable=False),
        sa.Column("owner_id", BinaryKey(255), nullable=False),
        sa.Column("doc_count", sa.BigInteger, nullable=False),
        sa.Column("total_len", sa.BigInteger, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memory_scope_stats"),
        sa.UniqueConstraint(
            "tenant_id", "cube", "owner_id", name="uq_memory_scope_stats_tenant_id_cube_owner_id"
        ),
        mysql_charset="utf8mb4",
    )
    op.create_table(
        "memory",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("scope_id", sa.BigInteger, nullable=False),
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("cube", BinaryKey(255), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("importance", sa.Float, nullable=False),
        sa.Column("content", LongText, nullable=False),
        sa.Column("source_event_ids", sa.Text, nullable=False),
        sa.Column("session_key", sa.String(255)),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("doc_len", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("event_time", Timestamp),
        sa.Column("valid_from", Timestamp, nullable=False),
        sa.Column("valid_to", Timestamp),
        sa.Column("superseded_by", sa.String(64)),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memory"),
        sa.UniqueConstraint("scope_id", "content_hash", name="uq_memory_scope_id_content_hash"),
        mysql_charset="utf8mb4",
    )
    op.create_index(
        "ix_memory_scope_id_session_key_seq", "memory", ["scope_id", "session_key", "seq"]
    )
    op.create_table(
        "memory_term",
        sa.Column("scope_id", sa.BigInteger, nullable=False),
        sa.Column("term", BinaryKey(64), nullable=False),
        sa.Column("memory_id", sa.BigInteger, nullable=False),
        sa.Column("tf", sa.Integer, nullable=False),
        sa.Column("doc_len", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("scope_id", "term", "memory_id", name="pk_memory_term"),
        mysql_charset="utf8mb4",
    )
    op.create_index("ix_memory_term_memory_id", "memory_term", ["memory_id"])
    op.create_table(
        "memory_embedding",
        sa.Column("scope_id", sa.BigInteger, nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("memory_id", sa.BigInteger, nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("scope_id", "model", "memory_id", name="pk_memory_embedding"),
        mysql_charset="utf8mb4",
    )


def downgrade() -> None:
    op.drop_table("memory_embedding")
    op.drop_index("ix_memory_term_memory_id", "memory_term")
    op.drop_table("memory_term")
    op.drop_index("ix_memory_scope_id_session_key_seq", "memory")
    op.drop_table("memory")
    op.drop_table("memory_scope_stats")
