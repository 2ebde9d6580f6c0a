"""memories attributed to their speaker; what consolidation wrote; reprocess jobs

A candidate now carries the user it is attributed to (``user_id``: the user
who said what it was judged from; NULL on the rows of earlier runs, which
belong to the run's user). ``memory_origin`` records every memory
consolidation writes (backfilled from the runs still held), and the
``reprocess_*`` tables hold the jobs of ``memstream reprocess``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from streams.adapters.db.schema.conversation import ExactKey

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")
ClosedId = ExactKey(400)


def upgrade() -> None:
    with op.batch_alter_table("consolidation_candidate") as batch:
        batch.add_column(sa.Column("user_id", ExactKey(255), nullable=True))
    op.create_table(
        "memory_origin",
        sa.Column("tenant_id", ExactKey(64), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("memory_id", ExactKey(255), nullable=False),
        sa.Column("cube", ExactKey(255), nullable=False),
        sa.Column("user_id", ExactKey(255), nullable=False),
        sa.Column("agent_id", ExactKey(255), nullable=False),
        sa.Column("conversation_id", ExactKey(255), nullable=False),
        sa.Column("closed_id", ClosedId, nullable=False),
        sa.Column("event_time", Timestamp, nullable=False),
        sa.Column("written_at", Timestamp, nullable=False),
        sa.Column("retired_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "provider", "memory_id",
                                name="pk_memory_origin"),
    )
    op.create_index("ix_memory_origin_tenant_id_conversation_id_event_time", "memory_origin",
                    ["tenant_id", "conversation_id", "event_time"])
    op.create_index("ix_memory_origin_closed_id", "memory_origin", ["closed_id"])
    # the memories of the runs still held (older runs were purged with their rows)
    op.execute(
        "INSERT INTO memory_origin (tenant_id, provider, memory_id, cube, user_id, agent_id, "
        "conversation_id, closed_id, event_time, written_at, retired_at) "
        "SELECT r.tenant_id, r.provider, c.memory_id, MIN(c.cube), MIN(r.user_id), "
        "MIN(r.agent_id), MIN(r.conversation_id), MIN(r.closed_id), MIN(c.event_time), "
        "MIN(COALESCE(c.written_at, r.updated_at)), NULL "
        "FROM consolidation_candidate c JOIN consolidation_run r ON r.closed_id = c.closed_id "
        "WHERE c.memory_id IS NOT NULL "
        "GROUP BY r.tenant_id, r.provider, c.memory_id")
    op.create_table(
        "reprocess_job",
        sa.Column("job_id", ExactKey(32), nullable=False),
        sa.Column("tenant_id", ExactKey(64), nullable=False),
        sa.Column("user_id", ExactKey(255), nullable=True),
        sa.Column("since", Timestamp, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("active", ExactKey(64), nullable=True),
        sa.Column("sessions", sa.Integer(), nullable=False),
        sa.Column("retired", sa.Integer(), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.Column("finished_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("job_id", name="pk_reprocess_job"),
        sa.UniqueConstraint("active", name="uq_reprocess_job_active"),
    )
    op.create_table(
        "reprocess_session",
        sa.Column("closed_id", ClosedId, nullable=False),
        sa.Column("job_id", ExactKey(32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("conversation_id", ExactKey(255), nullable=False),
        sa.Column("user_id", ExactKey(255), nullable=False),
        sa.Column("agent_id", ExactKey(255), nullable=False),
        sa.Column("first_at", Timestamp, nullable=False),
        sa.Column("last_at", Timestamp, nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("closed_id", name="pk_reprocess_session"),
    )
    op.create_index("ix_reprocess_session_job_id_seq", "reprocess_session", ["job_id", "seq"])
    op.create_table(
        "reprocess_message",
        sa.Column("closed_id", ClosedId, nullable=False),
        sa.Column("message_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("closed_id", "message_id", name="pk_reprocess_message"),
    )
    op.create_table(
        "reprocess_retire",
        sa.Column("job_id", ExactKey(32), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("memory_id", ExactKey(255), nullable=False),
        sa.Column("cube", ExactKey(255), nullable=False),
        sa.Column("user_id", ExactKey(255), nullable=False),
        sa.Column("agent_id", ExactKey(255), nullable=False),
        sa.Column("retired_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("job_id", "provider", "memory_id", name="pk_reprocess_retire"),
    )
    op.create_index("ix_reprocess_retire_job_id_cube_user_id", "reprocess_retire",
                    ["job_id", "cube", "user_id"])


def downgrade() -> None:
    op.drop_index("ix_reprocess_retire_job_id_cube_user_id", table_name="reprocess_retire")
    op.drop_table("reprocess_retire")
    op.drop_table("reprocess_message")
    op.drop_index("ix_reprocess_session_job_id_seq", table_name="reprocess_session")
    op.drop_table("reprocess_session")
    op.drop_table("reprocess_job")
    op.drop_index("ix_memory_origin_closed_id", table_name="memory_origin")
    op.drop_index("ix_memory_origin_tenant_id_conversation_id_event_time",
                  table_name="memory_origin")
    op.drop_table("memory_origin")
    with op.batch_alter_table("consolidation_candidate") as batch:
        batch.drop_column("user_id")
