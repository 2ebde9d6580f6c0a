"""The episode retention on MariaDB, two workers' providers on one database: the
episodes of a summarized conversation beyond the cube's count are expired (the
summary and the facts stay) and a warm search of another worker no longer returns
them; an unsummarized conversation keeps its episodes; an erasure racing a pass
(its page read before) leaves nothing of the erased user, no scope written again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr
from sqlalchemy import text

from streams.adapters.db.episode_rows import EpisodeRows
from streams.consolidation.rules.episode_retention import Episode
from streams.memory.model import USER_CUBE
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.settings import DatabaseSettings, Settings
from streams.worker.runtime import Runtime
from tests.agents.test_episode_retention import episodes, facts, retention, summarized
from tests.agents.test_erasure_sqlite import Setup, request
from tests.support.services import create_database, drop_database, unique
from tests.support.wiring import settings_for_tests


@pytest.fixture
async def runtimes() -> AsyncIterator[tuple[Runtime, Runtime]]:
    database = unique("ms_epret_")
    url = create_database(database)
    settings = settings_for_tests(database=DatabaseSettings(url=SecretStr(url)))
    one = await Runtime(settings, migrate=True).start()
    two = await Runtime(Settings(database=settings.database), migrate=False).start()
    try:
        yield one, two
    finally:
        await one.stop()
        await two.stop()
        drop_database(database)


async def found(rt: Runtime, user: str, query: str) -> list[str]:
    provider = rt.providers.get("mysql").provider
    assert isinstance(provider, BuiltinProvider)
    hits = await provider.search(Scope("t1", user, "a1"),
                                 SearchRequest(query, [USER_CUBE], top_k=50, relativity=0.0))
    return [m.content for m in hits]


async def test_folded_episodes_expire_and_an_erased_user_stays_erased(
        runtimes: tuple[Runtime, Runtime]) -> None:
    one, two = runtimes
    s = Setup(one.engine)
    await s.said()
    await summarized(s, "c1")
    await summarized(s, "c2")
    u1, facts_u1 = await episodes(s, "u1"), await facts(s, "u1")
    warm = await found(two, "u1", "dog Rex called")
    assert set(u1) & set(warm)  # worker 2 holds u1's episodes

    # a pass whose page was read before u2 was erased
    stale = await EpisodeRows(one.engine).page(0, 1000)
    assert {e.user_id for e in stale[0] if e.folded} == {"u1", "u2"}
    assert (await s.executor.erase(request(target="user", user_id="u2"))).status == "done"

    class ReadBefore:
        async def page(self, after_id: int, limit: int) -> tuple[list[Episode], int | None]:
            return stale

    r = retention(s, episodes_max_per_cube=1)
    r.scan = ReadBefore()
    await r.run()
    assert await episodes(s, "u1") == u1[-1:]  # the newest stays
    assert await facts(s, "u1") == facts_u1
    after = await found(two, "u1", "dog Rex called")
    assert not set(u1[:-1]) & set(after) and "My dog is called Rex." in after
    assert one.engine.dialect.name == "mysql"
    async with one.engine.connect() as conn:
        assert (await conn.execute(text(
            "SELECT summary FROM conversation_summary"))).scalars().all() == ["summary of c1"]
        assert (await conn.execute(text(
            "SELECT COUNT(*) FROM memory_scope_stats WHERE owner_id = 'u2'"))).scalar_one() == 0
    assert await s.rows_of("u2", "c2") == {}  # nothing of the erased user written again
    assert await found(two, "u2", "where do I live") == []

    r.scan = EpisodeRows(one.engine)  # a fresh pass: nothing left to expire
    assert await r.run() == {}
