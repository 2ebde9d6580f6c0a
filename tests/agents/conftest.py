"""Fixtures every agents-tier test may take."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.schema.all_tables import metadata


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """A SQLite file with every table of the schema, disposed after the test."""
    e = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'ms.db'}")
    async with e.begin() as conn:
        await conn.run_sync(metadata.create_all)
    yield e
    await e.dispose()
