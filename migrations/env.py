"""Alembic environment: runs migrations on the async engine memstream uses.

``target_metadata`` is the project's whole schema (every table module), so
autogenerate compares the database with all of it."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from streams.adapters.db.autogenerate import COMPARE_OPTIONS
from streams.adapters.db.engine import create_engine
from streams.adapters.db.schema.all_tables import metadata
from streams.settings import get_settings

config = context.config
target_metadata = metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        **COMPARE_OPTIONS,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _online() -> None:
    engine = create_engine(get_settings().database)
    async with engine.connect() as conn:
        await conn.run_sync(_run)
        await conn.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=get_settings().database.url.get_secret_value(),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
elif config.attributes.get("connection") is not None:
    _run(config.attributes["connection"])
else:
    asyncio.run(_online())
