"""ids compared exactly: no padding, no case folding, on every table

``utf8mb4_bin`` is a PAD SPACE collation: MySQL and MariaDB compare ``c-1``
and ``c-1 `` as equal, so the two conversations shared history, summary and
claims, and an event id ``e1 `` was dropped as a duplicate of ``e1``. User,
agent, cube and event ids of the memory and consolidation tables still had
the server's default, case-insensitive collation. Every identifier column
gets the server's NO PAD binary collation (MariaDB ``utf8mb4_nopad_bin``,
MySQL 8 ``utf8mb4_0900_bin``). SQLite compares byte for byte already.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# besides every column already binary: the ids the earlier revisions left to the default
IDS = ("user_id", "agent_id", "cube", "event_id", "closed_id", "owner_id")


def exact_collation(bind: sa.engine.Connection) -> str:
    if getattr(bind.dialect, "is_mariadb", False):
        return "utf8mb4_nopad_bin"
    version = bind.dialect.server_version_info or (0,)
    return "utf8mb4_0900_bin" if version >= (8, 0, 0) else "utf8mb4_bin"


def _alter(target: str, sources: tuple[str, ...], names: tuple[str, ...]) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "mysql":
        return
    rows = bind.execute(sa.text(
        "SELECT TABLE_NAME, COLUMN_NAME, CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE, "
        "COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
        "AND DATA_TYPE = 'varchar' AND TABLE_NAME <> 'alembic_version'")).all()
    for table, column, length, nullable, collation in rows:
        if collation == target or not (collation in sources or column in names):
            continue
        null = "NULL" if nullable == "YES" else "NOT NULL"
        op.execute(f"ALTER TABLE `{table}` MODIFY `{column}` VARCHAR({int(length)}) "
                   f"CHARACTER SET utf8mb4 COLLATE {target} {null}")


def upgrade() -> None:
    _alter(exact_collation(op.get_bind()), ("utf8mb4_bin",), IDS)


def downgrade() -> None:
    bind = op.get_bind()
    _alter("utf8mb4_bin", (exact_collation(bind),), ())
