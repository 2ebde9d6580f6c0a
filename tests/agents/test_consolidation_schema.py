"""Migration 0003 creates exactly the consolidation tables the code declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import create_async_engine

from streams.adapters.db.migrate import current_revision, upgrade
from streams.adapters.db.schema import consolidation as cs

MINE = [cs.consolidation_ledger, cs.consolidation_progress, cs.consolidation_run, cs.memory_origin,
        cs.consolidation_candidate, cs.pending_expiry]


async def test_migrated_sqlite_matches_the_declared_tables(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")
    try:
        await upgrade(engine)
        assert await current_revision(engine) is not None
        only = MetaData(naming_convention=MINE[0].metadata.naming_convention)
        for t in MINE:
            t.to_metadata(only)

        def diff(conn: Any) -> list[Any]:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return [d for d in compare_metadata(ctx, only)
                    if not (d[0] == "remove_table" or (d[0] == "remove_index"
                                                      and d[1].table.name not in only.tables))]

        async with engine.connect() as conn:
            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()
