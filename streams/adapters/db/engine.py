"""Engine creation and the dialect differences the stores need."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.sql.dml import Insert

from streams.settings import DatabaseSettings


def create_engine(settings: DatabaseSettings) -> AsyncEngine:
    url = make_url(settings.url.get_secret_value())
    kwargs: dict[str, Any] = {"echo": settings.echo}
    if url.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": settings.connect_timeout_s * 6}
    else:
        kwargs.update(
            pool_size=settings.pool_size,
            max_overflow=settings.pool_size,
            pool_pre_ping=True,
            pool_recycle=1800,
            pool_timeout=settings.connect_timeout_s,
            connect_args={"connect_timeout": int(max(1, settings.connect_timeout_s))},
        )
    return create_async_engine(url, **kwargs)


def is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


def insert_ignoring_duplicates(engine: AsyncEngine, table: Table, key: list[str]) -> Insert:
    """INSERT that leaves an existing row (same unique ``key``) exactly as it is."""
    if is_sqlite(engine):
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=key)
    stmt = mysql.insert(table)
    # assigning a key column its own value changes nothing and reports 0 rows
    return stmt.on_duplicate_key_update({key[-1]: table.c[key[-1]]})


def upsert(engine: AsyncEngine, table: Table, key: list[str], update: list[str]) -> Insert:
    """INSERT, or UPDATE ``update`` columns of the row with the same ``key``."""
    if is_sqlite(engine):
        s = sqlite.insert(table)
        return s.on_conflict_do_update(index_elements=key, set_={c: s.excluded[c] for c in update})
    m = mysql.insert(table)
    return m.on_duplicate_key_update({c: m.inserted[c] for c in update})
