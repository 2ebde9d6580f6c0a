"""Bring the database schema to the newest Alembic revision.

Several workers may start at once: on MySQL the upgrade runs under a named
lock (``GET_LOCK``), so exactly one of them migrates and the others wait.
"""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

LOCK_NAME = "memstream_schema_migration"


class MigrationsNotFoundError(RuntimeError):
    pass


def migrations_dir() -> Path:
    candidates = [
        os.environ.get("MEMSTREAM_MIGRATIONS_DIR"),
        Path(__file__).resolve().parents[2] / "migrations",
        Path.cwd() / "migrations",
    ]
    for c in candidates:
        if c and (Path(c) / "env.py").exists():
            return Path(c)
    raise MigrationsNotFoundError(
        "cannot find the migrations folder; set MEMSTREAM_MIGRATIONS_DIR"
    )


def _config(connection: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["connection"] = connection
    return cfg


def _upgrade(connection: Connection, revision: str) -> None:
    command.upgrade(_config(connection), revision)


def _current(connection: Connection) -> str | None:
    from alembic.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    async with engine.connect() as conn:
        mysql = conn.dialect.name == "mysql"
        if mysql:
            got = (await conn.execute(text("SELECT GET_LOCK(:n, 120)"), {"n": LOCK_NAME})).scalar()
            if got != 1:
                raise RuntimeError("timed out waiting for another worker's schema migration")
        try:
            await conn.run_sync(_upgrade, revision)
            await conn.commit()
        finally:
            if mysql:
                await conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": LOCK_NAME})


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(_current)
