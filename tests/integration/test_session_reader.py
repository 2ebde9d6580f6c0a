"""The Session read path on the real MariaDB and Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streams.adapters.db.messages import MessageStore, message_row
from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema.conversation import conversation_summary
from streams.wire.records import ChatMessage
from tests.integration.conftest import Stack, session_reader

T0 = datetime(2026, 11, 30, 8, tzinfo=UTC)


async def seed(stack: Stack, n: int, words: int = 50, summary: str | None = None) -> None:
    engine = stack.engine()
    try:
        await upgrade(engine)
        rows = [
            message_row(ChatMessage(
                event_id=f"e{i}", type="message", tenant_id="t1", user_id="u", agent_id="a",
                conversation_id="c", role="user" if i % 2 == 0 else "assistant",
                content=" ".join(f"w{i}x{j}" for j in range(words)),
                created_at=T0 + timedelta(minutes=i)), T0)
            for i in range(n)
        ]
        await MessageStore(engine).store(rows)
        if summary:
            async with engine.begin() as conn:
                await conn.execute(conversation_summary.insert().values(
                    tenant_id="t1", conversation_id="c", summary=summary, covered_until_id=n // 2,
                    covered_count=n // 2, token_count=10, updated_at=T0.replace(tzinfo=None)))
    finally:
        await engine.dispose()


async def test_long_history_gets_the_summary_first(stack: Stack) -> None:
    await seed(stack, 120, words=60, summary="The user is planning a trip to Lisbon in May.")
    async with session_reader(stack) as reader:
        w = await reader.window("t1", "c")
    assert w.truncated and w.summary and w.messages[0]["role"] == "system"
    assert "Lisbon" in w.messages[0]["content"]
    assert w.tokens <= 8000
    body = w.messages[1:]
    assert body[-1]["event_id"] == "e119"  # the newest are kept
    # the messages alone fit MAX_TOKEN_WINDOW - SUMMARY_TOKEN_BUDGET
    async with session_reader(stack) as reader:
        count = reader.count_tokens
        assert sum(count(m["content"]) + 4 for m in body) <= 8000 - 2000


async def test_short_history_is_returned_whole_without_summary(stack: Stack) -> None:
    await seed(stack, 10, words=5, summary="old summary")
    async with session_reader(stack) as reader:
        w = await reader.window("t1", "c")
    assert not w.truncated and w.summary is None
    assert [m["event_id"] for m in w.messages] == [f"e{i}" for i in range(10)]


async def test_last_n_is_honoured_from_cache_and_database(stack: Stack) -> None:
    await seed(stack, 30, words=3)
    async with session_reader(stack) as reader:
        first, src1 = await reader.messages("t1", "c", 6)  # miss -> database, rebuild
        second, src2 = await reader.messages("t1", "c", 6)  # hit
        many, src3 = await reader.messages("t1", "c", 500)  # beyond the list cap -> database
    assert (src1, src2, src3) == ("database", "cache", "database")
    assert [m["event_id"] for m in first] == [m["event_id"] for m in second] == \
        [f"e{i}" for i in range(24, 30)]
    assert len(many) == 30


async def test_without_redis_reads_go_to_the_database(stack: Stack) -> None:
    await seed(stack, 4, words=3)
    async with session_reader(stack, redis_url="") as reader:
        msgs, src = await reader.messages("t1", "c", 10)
    assert src == "database" and len(msgs) == 4


async def test_tenant_and_ids_are_case_sensitive(stack: Stack) -> None:
    engine = stack.engine()
    try:
        await upgrade(engine)
        store = MessageStore(engine)
        rows = [
            message_row(ChatMessage(
                event_id=event, type="message", tenant_id=tenant, user_id="u", agent_id="a",
                conversation_id=conv, role="user", content=f"{tenant} {conv}", created_at=T0), T0)
            for tenant, conv, event in (
                ("acme", "c", "e1"), ("ACME", "c", "e1"), ("acme", "C", "E1")
            )
        ]
        assert len(await store.store(rows)) == 3
        assert [m["content"] for m in await store.recent("ACME", "c", 10)] == ["ACME c"]
        assert [m["content"] for m in await store.recent("acme", "c", 10)] == ["acme c"]
        assert [m["content"] for m in await store.recent("acme", "C", 10)] == ["acme C"]
    finally:
        await engine.dispose()
