"""The last closed session of a conversation, on SQLite: never lowered (issue 42,
finding 6). A stale state that expires again with an older number must not take
back session numbers already used."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.messages import MessageStore

NOW = datetime(2026, 12, 4, 9, tzinfo=UTC)


async def test_a_lower_session_number_never_lowers_the_one_remembered(
        engine: AsyncEngine) -> None:
    store = MessageStore(engine)
    await store.remember_closed_sessions({("t1", "c1"): 5, ("t1", "c2"): 2}, NOW)
    await store.remember_closed_sessions({("t1", "c1"): 3, ("t1", "c2"): 4}, NOW)
    assert await store.last_closed_sessions([("t1", "c1"), ("t1", "c2")]) == {
        ("t1", "c1"): 5, ("t1", "c2"): 4}
    await store.remember_closed_sessions({("t1", "c1"): 7}, NOW)
    assert await store.last_closed_sessions([("t1", "c1")]) == {("t1", "c1"): 7}
