"""erased_event: the event ids an erasure deleted that its cutoff does not cover

An erasure covers its subject's events up to its event-time cutoff and those
read below the chat-topic offsets recorded with it. A message dated after the
cutoff (a producer whose clock runs ahead, a message sent while the erasure
ran) that the erasure deleted is remembered by its tenant and event id, with
its own time and the erasure's ``seq``, so that ingest refuses it when an
upstream sends it again. Purged with the messages' retention (by ``created_at``).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-12
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from streams.adapters.db.schema.conversation import ExactKey

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def upgrade() -> None:
    op.create_table(
        "erased_event",
        sa.Column("tenant_id", ExactKey(64), nullable=False),
        sa.Column("event_id", ExactKey(128), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "event_id", name="pk_erased_event"),
    )
    op.create_index("ix_erased_event_created_at", "erased_event", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_erased_event_created_at", table_name="erased_event")
    op.drop_table("erased_event")
