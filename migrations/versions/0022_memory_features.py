"""memory: what holding a memory derives from its text, stored when it is written

Every worker that holds a scope derives from each memory's text its speaker,
whether it is a standing instruction or announces a change, the values it
states, its word set and its index terms: several passes of regular expressions
over the whole text, about a millisecond for a long answer, paid again at every
load and every delta. ``memory`` gets ``features``: those values, derived once
by the writer (``streams/memory/providers/builtin/row_features.py``). Earlier
rows have none (NULL) and are derived from their text when read, as before.
On MariaDB a nullable column is added in place, without copying the table.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory") as batch:
        batch.add_column(sa.Column(
            "features", sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql"), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory") as batch:
        batch.drop_column("features")
