"""erasure: an index for every query it runs; fences in two rounds; a blocked erasure's error

Every statement an erasure (and ``last_done()``, which every worker runs every
second) sends reads through an index led by what it selects on, so it costs
the erased subject's rows, never a scan of the table
(``tests/integration/test_erasure_explain.py`` EXPLAINs each one):
``conversation_message`` by tenant and user (and by the sub-agent conversation
a message came from), ``memory`` by tenant and user, ``memory_embedding`` by
memory, ``consolidation_run`` by tenant and user or conversation,
``consolidation_candidate`` by user and by memory, ``pending_expiry``,
``memory_origin``, ``memory_search_log`` and ``reprocess_job`` by tenant and
user, ``memory_origin`` by tenant and memory, ``erasure`` by status; and for
a retention pass, ``conversation_summary`` by the time it was last updated.

``erasure_fence`` gets a ``round``: 1, the partition took the erasure in; 2, it
deleted the session states of the conversations a user erasure takes whole
(found by the erasure itself, no longer by ingest). The fences passed so far
are round 1. ``erasure.error`` says why an erasure is ``blocked``.

On MariaDB every index is built online (the tables stay writable); on a large
``conversation_message`` or ``memory`` it takes a while (docs/upgrading.md).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")

INDEXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("conversation_message", ("tenant_id", "user_id", "conversation_id")),
    ("conversation_message", ("tenant_id", "origin_conversation_id")),
    ("conversation_summary", ("updated_at",)),
    ("memory", ("tenant_id", "user_id", "cube")),
    ("memory_embedding", ("memory_id",)),
    ("consolidation_run", ("tenant_id", "user_id")),
    ("consolidation_run", ("tenant_id", "conversation_id")),
    ("consolidation_candidate", ("user_id",)),
    ("consolidation_candidate", ("memory_id",)),
    ("pending_expiry", ("tenant_id", "user_id")),
    ("memory_origin", ("tenant_id", "user_id")),
    ("memory_origin", ("tenant_id", "memory_id")),
    ("memory_search_log", ("tenant_id", "user_id")),
    ("reprocess_job", ("tenant_id", "user_id")),
    ("erasure", ("status", "seq")),
)
"""(table, columns) of every index this revision adds (the EXPLAIN test drops them
to show it would see the scans they prevent)."""


def index_name(table: str, columns: tuple[str, ...]) -> str:
    return f"ix_{table}_{'_'.join(columns)}"


def _fence_table(name: str, *, rounds: bool) -> None:
    key = ("seq", "round", "partition") if rounds else ("seq", "partition")
    op.create_table(
        name,
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        *([sa.Column("round", sa.Integer(), autoincrement=False, nullable=False,
                     server_default="1")] if rounds else []),
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("passed_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint(*key, name="pk_erasure_fence"),
    )


def _copy_fences(source: str, target: str, *, rounds: bool) -> None:
    """Round 1 is what a fence meant before; a round 2 pass the old schema cannot hold."""
    newer, older = (target, source) if rounds else (source, target)
    with_round = sa.table(newer, sa.column("seq"), sa.column("round"), sa.column("partition"),
                          sa.column("passed_at"))
    without = sa.table(older, sa.column("seq"), sa.column("partition"), sa.column("passed_at"))
    if rounds:
        op.execute(with_round.insert().from_select(
            ["seq", "round", "partition", "passed_at"],
            sa.select(without.c.seq, sa.literal(1), without.c.partition, without.c.passed_at)))
    else:
        op.execute(without.insert().from_select(
            ["seq", "partition", "passed_at"],
            sa.select(with_round.c.seq, with_round.c.partition, with_round.c.passed_at)
            .where(with_round.c.round == 1)))


def upgrade() -> None:
    for table, columns in INDEXES:
        op.create_index(index_name(table, columns), table, list(columns))
    op.add_column("erasure", sa.Column("error", sa.String(255), nullable=True))
    op.rename_table("erasure_fence", "erasure_fence_0013")
    _fence_table("erasure_fence", rounds=True)
    _copy_fences("erasure_fence_0013", "erasure_fence", rounds=True)
    op.drop_table("erasure_fence_0013")


def downgrade() -> None:
    op.rename_table("erasure_fence", "erasure_fence_0014")
    _fence_table("erasure_fence", rounds=False)
    _copy_fences("erasure_fence_0014", "erasure_fence", rounds=False)
    op.drop_table("erasure_fence_0014")
    with op.batch_alter_table("erasure") as batch:
        batch.drop_column("error")
    for table, columns in reversed(INDEXES):
        op.drop_index(index_name(table, columns), table_name=table)
