"""memory: an index by scope and kind, for searches of some kinds of a large scope

A search of some kinds only (a consolidation's conflict check wants facts) of a
scope too large to hold reads the newest valid memories of those kinds first
(``streams/memory/providers/builtin/unheld.py``), and only their postings and
vectors: ``memory`` gets an index on (``scope_id``, ``kind``, ``valid_to``), so
that read costs the memories it returns, never the scope's other kinds (a
cube of many episodes and few facts). On MariaDB the index is built online.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

INDEX = "ix_memory_scope_id_kind_valid_to"


def upgrade() -> None:
    op.create_index(INDEX, "memory", ["scope_id", "kind", "valid_to"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name="memory")
