"""consolidation ledger, runs, candidates and pending expiries

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

LongText = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql")
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def BinaryKey(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
    )


CLOSED_ID = BinaryKey(400)


def upgrade() -> None:
    op.create_table(
        "consolidation_ledger",
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("message_hash", sa.String(64), nullable=False),
        sa.Column("conversation_id", BinaryKey(255), nullable=False),
        sa.Column("event_id", sa.String(128), nullable=False),
        sa.Column("message_id", sa.BigInteger, nullable=False),
        sa.Column("closed_id", CLOSED_ID, nullable=False),
        sa.Column("claimed_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "message_hash", name="pk_consolidation_ledger"),
        mysql_charset="utf8mb4",
    )
    op.create_index("ix_consolidation_ledger_closed_id", "consolidation_ledger", ["closed_id"])
    op.create_index("ix_consolidation_ledger_claimed_at", "consolidation_ledger", ["claimed_at"])

    op.create_table(
        "consolidation_progress",
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("conversation_id", BinaryKey(255), nullable=False),
        sa.Column("claimed_until_id", sa.BigInteger, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "conversation_id", name="pk_consolidation_progress"),
        mysql_charset="utf8mb4",
    )

    op.create_table(
        "consolidation_run",
        sa.Column("closed_id", CLOSED_ID, nullable=False),
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("conversation_id", BinaryKey(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("long_memory", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("judge", sa.String(16)),
        sa.Column("message_count", sa.Integer, nullable=False),
        sa.Column("candidate_count", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.Column("finished_at", Timestamp),
        sa.PrimaryKeyConstraint("closed_id", name="pk_consolidation_run"),
        mysql_charset="utf8mb4",
    )
    op.create_index(
        "ix_consolidation_run_status_updated_at", "consolidation_run", ["status", "updated_at"]
    )

    op.create_table(
        "consolidation_candidate",
        sa.Column("closed_id", CLOSED_ID, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("cand_hash", sa.String(64), nullable=False),
        sa.Column("cube", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("importance", sa.Float, nullable=False),
        sa.Column("content", LongText, nullable=False),
        sa.Column("source_event_ids", sa.Text, nullable=False),
        sa.Column("event_time", Timestamp),
        sa.Column("action", sa.String(16)),
        sa.Column("expire_ids", sa.Text),
        sa.Column("decider", sa.String(16)),
        sa.Column("reason", sa.Text),
        sa.Column("write_started_at", Timestamp),
        sa.Column("memory_id", sa.String(255)),
        sa.Column("written_at", Timestamp),
        sa.Column("expired_at", Timestamp),
        sa.PrimaryKeyConstraint("closed_id", "seq", name="pk_consolidation_candidate"),
        mysql_charset="utf8mb4",
    )

    op.create_table(
        "pending_expiry",
        sa.Column("closed_id", CLOSED_ID, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("cube", sa.String(255), nullable=False),
        sa.Column("memory_ids", sa.Text, nullable=False),
        sa.Column("superseded_by", sa.String(255), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", Timestamp, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("closed_id", "seq", name="pk_pending_expiry"),
        mysql_charset="utf8mb4",
    )
    op.create_index("ix_pending_expiry_next_attempt_at", "pending_expiry", ["next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_pending_expiry_next_attempt_at", "pending_expiry")
    op.drop_table("pending_expiry")
    op.drop_table("consolidation_candidate")
    op.drop_index("ix_consolidation_run_status_updated_at", "consolidation_run")
    op.drop_table("consolidation_run")
    op.drop_table("consolidation_progress")
    op.drop_index("ix_consolidation_ledger_claimed_at", "consolidation_ledger")
    op.drop_index("ix_consolidation_ledger_closed_id", "consolidation_ledger")
    op.drop_table("consolidation_ledger")
