"""dead-letter ledger rows name the record they stand for

A row of the dead-letter ledger is keyed by where its record was read (topic,
partition, offset). Once a topic is deleted and created again its offsets start
over, and a new record read at an offset seen before must not be taken for the
old one: each row keeps a digest of its record (key, value, timestamp), and a row
of another record is replaced. Rows recorded before have none and count as
another record's.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dead_letter_ledger") as batch:
        batch.add_column(sa.Column("record_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dead_letter_ledger") as batch:
        batch.drop_column("record_digest")
