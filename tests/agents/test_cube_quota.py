"""The ``cube_memories`` quota with the real pipeline and built-in provider on SQLite:
a cube at its tenant's quota gets no new episodes while the run's facts are still
written; another tenant's override lifts it; each decision is counted."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.messages import MessageStore, message_row
from streams.wire.records import ChatMessage, SessionClosed
from streams.worker.quotas import process_quotas
from tests.agents.test_erasure_sqlite import T0, Setup
from tests.support.wiring import settings_for_tests


def with_quota(engine: AsyncEngine, **quotas: object) -> Setup:
    s = Setup(engine)
    s.wiring.quotas = process_quotas(settings_for_tests(quotas=quotas))
    s.pipeline = s.wiring.consolidation().pipeline
    return s


async def second_session(s: Setup, tenant: str = "t1") -> None:
    """u1 again, in conversation c3: a fact and its episode."""
    lines = ["I work at Acme.", "Good to know."]
    await MessageStore(s.engine).store([message_row(ChatMessage(
        event_id=f"{tenant}-c3-{i}", type="message", tenant_id=tenant, user_id="u1",
        agent_id="a1", conversation_id="c3", role="user" if i == 0 else "assistant",
        content=line, created_at=T0 + timedelta(hours=1, minutes=i)), T0, session_seq=1)
        for i, line in enumerate(lines)])
    at = T0 + timedelta(hours=1, minutes=5)
    out = await s.pipeline.run(SessionClosed(
        closed_id=f"{tenant}/c3#1", tenant_id=tenant, user_id="u1", agent_id="a1",
        conversation_id="c3", trigger="explicit", session_seq=1, closed_at=at,
        last_activity=at, message_count=2))
    assert out.outcome == "done"


async def kinds(s: Setup, user: str = "u1") -> list[tuple[str, str]]:
    async with s.engine.connect() as conn:
        return [(r[0], r[1]) for r in (await conn.execute(text(
            "SELECT kind, content FROM memory WHERE user_id = :u AND valid_to IS NULL "
            "ORDER BY id"), {"u": user})).all()]


async def test_a_cube_at_its_quota_gets_facts_but_no_new_episodes(engine: AsyncEngine) -> None:
    s = with_quota(engine, memories_per_cube=3)
    await s.said()  # u1's and u2's first sessions: their cubes were empty
    before = await kinds(s)
    assert len(before) >= 3 and any(k == "episode" for k, _ in before)
    await second_session(s)
    after = await kinds(s)
    new = after[len(before):]
    assert ("fact", "I work at Acme.") in new
    assert [c for k, c in new if k == "episode"] == []
    quota = s.wiring.quotas.cube_memories
    assert quota.tally("t1") == (2, 1)
    assert quota.view("t1", 0.0) == {"quota": "cube_memories", "limited": True, "limit": 3,
                                     "allowed": 2, "refused": 1}


async def test_without_a_quota_the_episodes_are_written(engine: AsyncEngine) -> None:
    s = with_quota(engine, memories_per_cube=3,
                   tenant_overrides={"t1": {"memories_per_cube": 0}})
    await s.said()
    await second_session(s)
    assert any(k == "episode" and "Acme" in c for k, c in await kinds(s))
    assert s.wiring.quotas.cube_memories.tally("t1") == (3, 0)
