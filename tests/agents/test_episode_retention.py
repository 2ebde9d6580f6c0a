"""The episode retention on the embedded default (SQLite), with the real built-in
provider, pipeline and stores: only episodes whose conversation's summary covers
them go, beyond the cube's count or past the age (a tenant's override first), as
superseded rows out of every search; facts and summaries stay; a page read before an
erasure brings nothing of the erased user back; passes go on a page at a time."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.episode_rows import EpisodeRows
from streams.adapters.db.schema.memory import memory_scope_stats
from streams.adapters.db.summaries import SummaryRows
from streams.consolidation.episode_retention import EpisodeRetention
from streams.consolidation.rules.episode_retention import Episode
from streams.metrics import EPISODES_RETIRED
from streams.worker.quotas import process_quotas
from tests.agents.test_erasure_sqlite import Setup, request
from tests.support.wiring import settings_for_tests


async def summarized(s: Setup, conv: str) -> None:
    """The conversation's summary, covering every one of its messages."""
    async with s.engine.connect() as conn:
        until, total = (await conn.execute(text(
            "SELECT MAX(id), COUNT(*) FROM conversation_message WHERE conversation_id = :c"),
            {"c": conv})).one()
    stored = await SummaryRows(s.engine).store("t1", conv, f"summary of {conv}", until=until,
                                               total=total, tokens=3, now=datetime.now(UTC))
    assert stored == "stored"


async def episodes(s: Setup, user: str, *, valid: bool = True) -> list[str]:
    async with s.engine.connect() as conn:
        return list((await conn.execute(text(
            "SELECT content FROM memory WHERE kind = 'episode' AND user_id = :u AND "
            f"valid_to IS {'' if valid else 'NOT '}NULL ORDER BY id"), {"u": user})).scalars())


async def facts(s: Setup, user: str) -> int:
    async with s.engine.connect() as conn:
        return int((await conn.execute(text(
            "SELECT COUNT(*) FROM memory WHERE kind = 'fact' AND user_id = :u AND "
            "valid_to IS NULL"), {"u": user})).scalar_one())


def retention(s: Setup, chunk: int = 1000, **consolidation: object) -> EpisodeRetention:
    s.wiring.quotas = process_quotas(settings_for_tests(
        consolidation={"episode_retention_chunk": chunk, **consolidation},
        quotas={"tenant_overrides": {"t9": {"episodes_max_per_cube": 0}}}))
    s.wiring.settings.consolidation.episode_retention_chunk = chunk
    return s.wiring.episode_retention()


async def test_episodes_beyond_the_cube_count_go_once_folded(engine: AsyncEngine) -> None:
    s = Setup(engine)
    await s.said()
    await summarized(s, "c1")  # c2 has no summary: its episodes stay
    u1, u2, facts_u1 = await episodes(s, "u1"), await episodes(s, "u2"), await facts(s, "u1")
    assert len(u1) >= 4 and any("Rex" in e for e in u1)
    counted = EPISODES_RETIRED.labels("t1", "count")._value.get()

    r = retention(s, episodes_max_per_cube=1)
    assert await r.run() == {("t1", "count"): len(u1) - 1}
    assert await episodes(s, "u1") == u1[-1:]  # the newest stays
    assert await episodes(s, "u2") == u2
    assert await facts(s, "u1") == facts_u1 > 0  # facts stay
    assert EPISODES_RETIRED.labels("t1", "count")._value.get() - counted == len(u1) - 1
    found = await s.search("u1", "what is my dog called")
    assert not any(e in found for e in u1[:-1]) and "My dog is called Rex." in found
    async with engine.connect() as conn:
        superseded = set((await conn.execute(text(
            "SELECT superseded_by FROM memory WHERE valid_to IS NOT NULL"))).scalars())
        kept = (await conn.execute(text("SELECT summary FROM conversation_summary"))).all()
        valid, counted_docs = (await conn.execute(text(
            "SELECT (SELECT COUNT(*) FROM memory WHERE valid_to IS NULL), "
            "(SELECT SUM(doc_count) FROM memory_scope_stats)"))).one()
    assert superseded == {"summary"} and kept == [("summary of c1",)]
    assert valid == counted_docs
    assert await r.run() == {}  # nothing left to do


async def test_old_episodes_go_by_age_a_page_at_a_time(engine: AsyncEngine) -> None:
    s = Setup(engine)
    await s.said()  # said on 2026-11-30
    await summarized(s, "c1")
    await summarized(s, "c2")
    u1, u2 = await episodes(s, "u1"), await episodes(s, "u2")
    r = retention(s, chunk=3, episode_max_age_days=1)
    passes = [await r.run() for _ in range((len(u1) + len(u2)) // 3 + 1)]
    assert sum(n for p in passes for n in p.values()) == len(u1) + len(u2)
    assert r.after_id == 0  # past the last episode: the next pass starts over
    assert await episodes(s, "u1") == await episodes(s, "u2") == []
    assert await s.search("u1", "where do I live") == ["I live in Oslo."]


async def test_a_page_read_before_an_erasure_brings_nothing_back(engine: AsyncEngine) -> None:
    s = Setup(engine)
    await s.said()
    await summarized(s, "c1")
    r = retention(s, episodes_max_per_cube=1)
    page = await EpisodeRows(engine).page(0, 1000)
    assert any(e.user_id == "u1" for e in page[0])

    class ReadBefore:
        async def page(self, after_id: int, limit: int) -> tuple[list[Episode], int | None]:
            return page

    r.scan = ReadBefore()
    assert (await s.executor.erase(request(target="user", user_id="u1"))).status == "done"
    await r.run()  # the expiry of rows the erasure deleted
    assert await s.rows_of("u1", "c1") == {}
    async with engine.connect() as conn:
        scopes = (await conn.execute(select(func.count()).select_from(memory_scope_stats)
                                     .where(memory_scope_stats.c.owner_id == "u1"))).scalar_one()
    assert scopes == 0  # no scope written again for the erased user
    assert await s.search("u1", "where do I live") == []
