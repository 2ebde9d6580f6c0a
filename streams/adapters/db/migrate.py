"""Bring the database schema to the newest Alembic revision, or check that it is.

Several workers may start at once: on MySQL the upgrade runs under a named
lock (``GET_LOCK``), so exactly one of them migrates and the others wait. A
worker that must not migrate (``memstream worker --no-migrate``) checks with
:func:`require_current` instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

LOCK_NAME = "memstream_schema_migration"


class MigrationsNotFoundError(RuntimeError):
    pass


class SchemaNotCurrentError(RuntimeError):
    """The database has no memstream schema, or an older one than this code needs."""


def migrations_dir() -> Path:
    candidates = [
        os.environ.get("MEMSTREAM_MIGRATIONS_DIR"),
        Path(__file__).resolve().parents[3] / "migrations",  # beside streams/
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


def _scripts() -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    return ScriptDirectory.from_config(cfg)


async def require_current(engine: AsyncEngine) -> str:
    """The database's revision, when it is this code's newest or one this code
    does not know (a newer release migrated it: migrations only add); otherwise
    :class:`SchemaNotCurrentError`, saying how to upgrade. Changes nothing."""
    scripts = _scripts()
    head = scripts.get_current_head()
    current = await current_revision(engine)
    fix = "run `memstream db upgrade` first, or start the worker without --no-migrate"
    if current is None:
        raise SchemaNotCurrentError(
            f"the database has no memstream schema (this version needs revision {head}); {fix}")
    if current != head and current in {s.revision for s in scripts.walk_revisions()}:
        raise SchemaNotCurrentError(
            f"the database schema is at revision {current}, older than the revision {head} "
            f"this version needs; {fix}")
    return current
