"""``memstream reprocess`` after one memory was erased (SQLite, the built-in
provider, the real pipeline): the erased memory stays out, and the other
memories judged from the same message stay valid."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.consolidation.reprocess import ReprocessRequest
from tests.agents.test_erasure_sqlite import Setup, request


async def valid(engine: AsyncEngine, user: str) -> dict[str, str]:
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            "SELECT id, content FROM memory WHERE user_id = :u AND valid_to IS NULL"),
            {"u": user})).all()
    return {str(r.id): str(r.content) for r in rows}


async def memory_id(engine: AsyncEngine, content: str) -> str:
    async with engine.connect() as conn:
        return str((await conn.execute(text(
            "SELECT id FROM memory WHERE content = :c"), {"c": content})).scalar_one())


async def reprocess(s: Setup, user: str) -> None:
    reprocessor = s.wiring.reprocessor()
    job, _, _ = await reprocessor.start(ReprocessRequest("t1", user_id=user))
    assert job is not None
    await reprocessor.run(job)


async def test_reprocess_after_an_episode_erased_keeps_the_fact_of_its_message(
        engine: AsyncEngine) -> None:
    s = Setup(engine)
    await s.said()
    before = await valid(engine, "u1")
    assert {"I live in Oslo.", "User: I live in Oslo."} <= set(before.values())
    episode = await memory_id(engine, "User: I live in Oslo.")
    await s.executor.erase(request(target="memory", memory_id=episode))
    await reprocess(s, "u1")
    after = await valid(engine, "u1")
    assert "User: I live in Oslo." not in after.values()  # the erased episode stays out
    assert sorted(after.values()) == sorted(c for m, c in before.items() if m != episode)


async def test_reprocess_after_a_fact_erased_keeps_the_episode_of_its_message(
        engine: AsyncEngine) -> None:
    s = Setup(engine)
    await s.said()
    before = await valid(engine, "u1")
    fact = await memory_id(engine, "I live in Oslo.")
    await s.executor.erase(request(target="memory", memory_id=fact))
    await reprocess(s, "u1")
    after = await valid(engine, "u1")
    assert "I live in Oslo." not in after.values()
    assert sorted(after.values()) == sorted(c for m, c in before.items() if m != fact)
