"""ids compared byte for byte: conversation history keys get a binary collation

Tenant, event and conversation ids are case-sensitive (``acme`` and ``ACME``
are different tenants); MySQL's default collation compared them without
case. SQLite already compares byte for byte, so this revision only changes
MySQL.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op
from sqlalchemy.dialects import mysql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

COLUMNS = [
    ("conversation_message", "tenant_id", 64),
    ("conversation_message", "event_id", 128),
    ("conversation_message", "conversation_id", 255),
    ("conversation_summary", "tenant_id", 64),
    ("conversation_summary", "conversation_id", 255),
]


def _alter(collation: str) -> None:
    if op.get_bind().dialect.name != "mysql":
        return
    for table, column, length in COLUMNS:
        op.alter_column(
            table, column,
            existing_type=mysql.VARCHAR(length),
            type_=mysql.VARCHAR(length, charset="utf8mb4", collation=collation),
            existing_nullable=False,
            nullable=False,
        )


def upgrade() -> None:
    _alter("utf8mb4_bin")


def downgrade() -> None:
    _alter("utf8mb4_unicode_ci")
