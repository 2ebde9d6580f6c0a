"""message retention by when memstream stored a message

Retention deletes messages by ``ingested_at`` (when memstream stored them), not by
the client's ``created_at``, so a back-dated import is kept as long as anything
stored that day: it is read through an index of its own. Every row has had
``ingested_at`` since 0001.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-10
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_conversation_message_ingested_at", "conversation_message",
                    ["ingested_at"])


def downgrade() -> None:
    op.drop_index("ix_conversation_message_ingested_at", table_name="conversation_message")
