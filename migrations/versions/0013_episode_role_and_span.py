"""episodes keep their message's role, passages their place in the message

An assistant's long message is kept as passages (each an episodic memory):
``memory`` and ``consolidation_candidate`` get the ``role`` of the message an
episode was made from and, for a passage, its character offsets in that
message's content (``span_start``, ``span_end``). The episodes stored before
get the role of the message they were made from, read from
``conversation_message`` by their source event (or, where retention removed
it, from the speaker the episode's text begins with: ``User: `` or
``Assistant: ``); a role still unknown stays NULL and counts as a user's.
Earlier rows are whole messages: no span.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TABLES = ("memory", "consolidation_candidate")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("role", sa.String(16), nullable=True))
            batch.add_column(sa.Column("span_start", sa.Integer(), nullable=True))
            batch.add_column(sa.Column("span_end", sa.Integer(), nullable=True))
    first_source = ("JSON_UNQUOTE(JSON_EXTRACT(memory.source_event_ids, '$[0]'))"
                    if op.get_bind().dialect.name == "mysql"
                    else "json_extract(memory.source_event_ids, '$[0]')")
    op.execute(
        "UPDATE memory SET role = (SELECT c.role FROM conversation_message c "
        f"WHERE c.tenant_id = memory.tenant_id AND c.event_id = {first_source}) "
        "WHERE kind = 'episode' AND role IS NULL")
    for role, prefix in (("assistant", "Assistant: %"), ("user", "User: %")):
        op.execute(f"UPDATE memory SET role = '{role}' "
                   f"WHERE kind = 'episode' AND role IS NULL AND content LIKE '{prefix}'")


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("span_end")
            batch.drop_column("span_start")
            batch.drop_column("role")
