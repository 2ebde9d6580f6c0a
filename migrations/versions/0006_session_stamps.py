"""sessions stamped on messages; the last closed session of dropped states

Every message stores the session it belongs to, so that a session's
consolidation takes exactly its messages, whenever they were stored.
``consolidation_progress`` remembers the highest session claimed, so a session
end replayed after the ledger's retention finds nothing new.
``conversation_session`` remembers the last closed session of a conversation
whose state left the sessions table after the retention.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def BinaryKey(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
    )


def upgrade() -> None:
    with op.batch_alter_table("conversation_message") as batch:
        batch.add_column(sa.Column("session_seq", sa.Integer, nullable=True))
    op.create_index("ix_conversation_message_tenant_id_conversation_id_session_seq",
                    "conversation_message", ["tenant_id", "conversation_id", "session_seq"])
    op.create_index("ix_consolidation_ledger_tenant_id_conversation_id_message_id",
                    "consolidation_ledger", ["tenant_id", "conversation_id", "message_id"])
    with op.batch_alter_table("consolidation_progress") as batch:
        batch.add_column(sa.Column("claimed_session_seq", sa.Integer, nullable=False,
                                   server_default="0"))
    op.create_table(
        "conversation_session",
        sa.Column("tenant_id", BinaryKey(64), nullable=False),
        sa.Column("conversation_id", BinaryKey(255), nullable=False),
        sa.Column("last_closed_seq", sa.Integer, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "conversation_id", name="pk_conversation_session"),
        mysql_charset="utf8mb4",
    )


def downgrade() -> None:
    op.drop_table("conversation_session")
    with op.batch_alter_table("consolidation_progress") as batch:
        batch.drop_column("claimed_session_seq")
    op.drop_index("ix_consolidation_ledger_tenant_id_conversation_id_message_id",
                  table_name="consolidation_ledger")
    op.drop_index("ix_conversation_message_tenant_id_conversation_id_session_seq",
                  table_name="conversation_message")
    with op.batch_alter_table("conversation_message") as batch:
        batch.drop_column("session_seq")
