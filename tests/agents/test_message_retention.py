"""Message retention on SQLite with the real consolidation pipeline: age is when
memstream stored a message (``ingested_at``), never the client's ``created_at``,
and a message whose consolidation is not over (no session end yet, or its run
left unfinished) is never deleted, however old."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.messages import MessageStore, message_row
from streams.adapters.db.schema.consolidation import consolidation_run
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.erasure import erased_event
from streams.wire.records import ChatMessage, SessionClosed
from tests.agents.test_erasure_sqlite import Setup


async def store(s: Setup, conv: str, *, created: datetime, stored: datetime) -> None:
    await MessageStore(s.engine).store([message_row(ChatMessage(
        event_id=f"{conv}-{i}", type="message", tenant_id="t1", user_id="u9", agent_id="a1",
        conversation_id=conv, role="user" if i % 2 == 0 else "assistant",
        content=f"line {i} of {conv}: I keep bees.", created_at=created + timedelta(minutes=i)),
        stored, session_seq=1) for i in range(2)])


async def consolidate(s: Setup, conv: str, at: datetime) -> None:
    out = await s.pipeline.run(SessionClosed(
        closed_id=f"t1/{conv}#1", tenant_id="t1", user_id="u9", agent_id="a1",
        conversation_id=conv, trigger="explicit", session_seq=1, closed_at=at,
        last_activity=at, message_count=2))
    assert out.outcome == "done"


async def test_retention_ages_by_stored_time_and_keeps_what_is_not_consolidated(
        engine: AsyncEngine) -> None:
    s = Setup(engine)
    now = datetime.now(UTC)
    old, ancient = now - timedelta(days=40), now - timedelta(days=400)
    # a back-dated import stored today and consolidated: not old
    await store(s, "imported", created=ancient, stored=now)
    await consolidate(s, "imported", now)
    # stored 40 days ago, its session never ended: not consolidated yet
    await store(s, "open", created=old, stored=old)
    # stored 40 days ago, consolidated: goes
    await store(s, "done", created=old, stored=old)
    await consolidate(s, "done", old)
    # stored 40 days ago, consolidated but its run is left unfinished
    await store(s, "stuck", created=old, stored=old)
    await consolidate(s, "stuck", old)
    async with engine.begin() as conn:
        await conn.execute(update(consolidation_run).where(
            consolidation_run.c.closed_id == "t1/stuck#1").values(status="judged"))

    m = conversation_message.c
    s.wiring.settings.erasure.message_retention_days = 30
    counts = await s.wiring.retention().run()
    assert counts["conversation_message"] == 2
    async with engine.connect() as conn:
        left = dict((await conn.execute(
            select(m.conversation_id, func.count()).group_by(m.conversation_id))).all())
    assert {c: n for c, n in left.items() if c != "c1" and c != "c2"} == {
        "imported": 2, "open": 2, "stuck": 2}
    assert await s.wiring.retention().run() == {}


async def test_retention_keeps_the_ids_of_erased_messages(engine: AsyncEngine) -> None:
    """A message is aged from when it was stored: an erased one sent again would be
    stored anew and live a whole retention, so its remembered id never ages out."""
    s = Setup(engine)
    old = datetime.now(UTC) - timedelta(days=400)
    async with engine.begin() as conn:
        await conn.execute(insert(erased_event).values(
            tenant_id="t1", event_id="e-ahead", created_at=old.replace(tzinfo=None), seq=1))
    s.wiring.settings.erasure.message_retention_days = 30
    await s.wiring.retention().run()
    async with engine.connect() as conn:
        kept = (await conn.execute(select(erased_event.c.event_id))).scalars().all()
    assert kept == ["e-ahead"]
