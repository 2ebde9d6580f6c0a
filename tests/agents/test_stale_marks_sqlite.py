"""The stale-history mark store on SQLite (the demo's database): the migrated
table matches the declared one, and compare-and-clear works the same."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema.conversation import stale_history_mark
from streams.adapters.db.stale_marks import StaleMarkStore
from streams.session.model import StaleMark

NOW = datetime(2026, 12, 4, 9, tzinfo=UTC)


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    e = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")
    await upgrade(e)
    yield e
    await e.dispose()


async def test_the_migration_creates_the_declared_table(engine: AsyncEngine) -> None:
    mine = MetaData(naming_convention=stale_history_mark.metadata.naming_convention)
    stale_history_mark.to_metadata(mine)

    def diff(conn: Any) -> list[Any]:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return [d for d in compare_metadata(ctx, mine)
                if d[0] != "remove_table" and (d[0] != "remove_index"
                                               or d[1].table.name in mine.tables)]

    async with engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_clear_deletes_only_marks_not_marked_again(engine: AsyncEngine) -> None:
    store = StaleMarkStore(engine)
    first = await store.mark([("t", "a"), ("t", "b")], NOW)
    again = await store.mark([("t", "b"), ("t", "c")], NOW)
    assert [(m.key, m.mark_id) for m in await store.page(None, 10)] == \
        [(("t", "a"), first), (("t", "b"), again), (("t", "c"), again)]
    assert [m.key for m in await store.page(("t", "a"), 1)] == [("t", "b")]
    assert await store.clear([StaleMark("t", "a", first), StaleMark("t", "b", first)]) == \
        {("t", "b"): again}
    assert await store.get("t", "a") is None and await store.count() == 2
