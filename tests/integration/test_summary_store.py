"""Summaries stored against the real MariaDB: the first summaries of many
conversations stored at once never deadlock (each took a gap lock on the missing
row, then waited for the others' to insert), and a summary is still never moved
back by an older one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import create_engine
from streams.adapters.db.schema.conversation import conversation_message, conversation_summary
from streams.adapters.db.summaries import SummaryRows
from streams.settings import DatabaseSettings
from tests.support.services import drop_database, migrated_database, unique

T0 = datetime(2026, 12, 7, 8, tzinfo=UTC)
CONVERSATIONS = 12


@pytest.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    name = f"ms_{unique('sum')}"
    url = await migrated_database(name)
    e = create_engine(DatabaseSettings(url=SecretStr(url), pool_size=2 * CONVERSATIONS))
    yield e
    await e.dispose()
    drop_database(name)


async def messages(engine: AsyncEngine, conversations: list[str], each: int) -> dict[str, int]:
    """``each`` messages of every conversation, interleaved; the last id of each."""
    last: dict[str, int] = {}
    async with engine.begin() as conn:
        for i in range(each):
            for c in conversations:
                r = await conn.execute(insert(conversation_message).values(
                    tenant_id="t1", conversation_id=c, event_id=f"{c}-{i}", user_id="u1",
                    agent_id="a1", role="user", content=f"message {i} of {c}",
                    created_at=T0.replace(tzinfo=None), ingested_at=T0.replace(tzinfo=None)))
                last[c] = int(r.inserted_primary_key[0])
    return last


async def test_first_summaries_of_many_conversations_at_once_all_store(
        engine: AsyncEngine) -> None:
    rows = SummaryRows(engine)
    async with engine.begin() as conn:  # a summary after every new one's key: one gap
        await conn.execute(insert(conversation_summary).values(
            tenant_id="zz", conversation_id="last", summary="s", covered_until_id=1,
            covered_count=1, token_count=1, updated_at=T0.replace(tzinfo=None)))
    for round_ in range(5):
        conversations = [f"r{round_}c{i:02d}" for i in range(CONVERSATIONS)]
        last = await messages(engine, conversations, 3)
        results = await asyncio.gather(*(
            rows.store("t1", c, f"summary of {c}", until=last[c], total=3, tokens=3, now=T0)
            for c in conversations), return_exceptions=True)
        assert results == ["stored"] * CONVERSATIONS, results


async def test_an_older_summary_never_replaces_a_newer_one(engine: AsyncEngine) -> None:
    rows = SummaryRows(engine)
    last = await messages(engine, ["c1"], 4)
    first = last["c1"] - 2
    stores = await asyncio.gather(
        rows.store("t1", "c1", "newer", until=last["c1"], total=4, tokens=1, now=T0),
        rows.store("t1", "c1", "older", until=first, total=2, tokens=1, now=T0))
    assert sorted(stores) in (["stale", "stored"], ["stored", "stored"])
    assert await rows.store("t1", "c1", "older", until=first, total=2, tokens=1,
                            now=T0) == "stale"
    s = conversation_summary.c
    async with engine.connect() as conn:
        row = (await conn.execute(select(s.summary, s.covered_until_id))).one()
    assert (row.summary, row.covered_until_id) == ("newer", last["c1"])
