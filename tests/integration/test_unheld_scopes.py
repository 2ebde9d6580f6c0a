"""A scope larger than a worker holds (``query.scope_hold_max``) on MariaDB: searched
from the database per query (``streams/memory/providers/builtin/unheld.py``), never
held, with the held path's results, and never a memory expired, erased or of another
tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema.memory import memory_scope_stats
from streams.memory.model import USER_CUBE, MemoryCandidate, agent_cube
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.providers.builtin.unheld import UnheldLimits, UnheldReads
from tests.integration.test_builtin_ann import QUERIES, T0, WORDS, TopicEmbedder, turns
from tests.support.services import create_database, drop_database, unique

ALICE = Scope("acme", "alice", "helper")
MALLORY = Scope("other", "alice", "helper")  # the same user and agent names, another tenant
CUBES = [USER_CUBE, agent_cube("helper")]


@pytest.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    database = unique("ms_unheld_")
    eng = create_async_engine(create_database(database), pool_size=4)
    try:
        await upgrade(eng)
        yield eng
    finally:
        await eng.dispose()
        drop_database(database)


async def fill(p: BuiltinProvider, scope: Scope = ALICE, sessions: int = 10,
               per: int = 30) -> list[str]:
    ids: list[str] = []
    for s in range(sessions):
        ids += (await p.add(scope, USER_CUBE, turns(s, per))).ids
    await p.add(scope, agent_cube("helper"), turns(99, 12))
    return ids


def provider(engine: AsyncEngine, **kw: Any) -> BuiltinProvider:
    return BuiltinProvider(engine, embedder=TopicEmbedder(), candidates=40, **kw)


async def top(p: BuiltinProvider, q: str, scope: Scope = ALICE, n: int = 8,
              cubes: list[str] = CUBES) -> list[str]:
    got = await p.search(scope, SearchRequest(query=q, cubes=cubes, top_k=n, relativity=0.0))
    return [m.id for m in got]


async def user_scope(engine: AsyncEngine) -> int:
    s = memory_scope_stats.c
    async with engine.connect() as conn:
        return int((await conn.execute(select(s.id).where(
            s.tenant_id == ALICE.tenant_id, s.cube == USER_CUBE))).scalar_one())


async def test_a_scope_over_the_ceiling_is_searched_unheld_as_the_held_path_ranks_it(
        engine: AsyncEngine) -> None:
    held = provider(engine)
    await fill(held)
    unheld = provider(engine, scope_hold_max=50)  # the user's 300: over; the agent's 12: held
    for q in QUERIES:
        assert await top(unheld, q) == await top(held, q), q
    sid = await user_scope(engine)
    assert held.cache.holds(sid)
    assert not unheld.cache.holds(sid)
    assert unheld.cache.held_memories == 12  # the agent's scope only


async def test_a_tight_read_still_finds_the_held_paths_best(engine: AsyncEngine) -> None:
    """Few postings a term and few newest vectors: the best memory is still found."""
    held = provider(engine)
    await fill(held)
    tight = provider(engine, scope_hold_max=50, unheld=UnheldLimits(60, 50))
    same = 0
    for q in QUERIES:
        want, got = await top(held, q, n=3), await top(tight, q, n=3)
        same += want[0] == got[0]
        assert set(got) <= set(await top(held, q, n=40)), q
    assert same >= len(QUERIES) - 1
    assert not tight.cache.holds(await user_scope(engine))


async def test_a_scope_growing_past_the_ceiling_is_let_go(engine: AsyncEngine) -> None:
    p = provider(engine, scope_hold_max=200)
    await fill(p, sessions=5)  # 150: held
    await top(p, QUERIES[0])
    sid = await user_scope(engine)
    assert p.cache.holds(sid)
    await p.add(ALICE, USER_CUBE, turns(50, 60))  # 210: over
    assert await top(p, QUERIES[0])
    assert not p.cache.holds(sid)
    assert p.cache.held_memories == 12


async def test_expired_erased_and_other_tenants_memories_never_come_back(
        engine: AsyncEngine) -> None:
    p = provider(engine, scope_hold_max=50)
    await fill(p)
    others = set(await fill(p, MALLORY))
    best = {q: await top(p, q, cubes=[USER_CUBE]) for q in QUERIES}
    assert not others & {i for ids in best.values() for i in ids}
    expired = {ids[0] for ids in best.values()}
    await p.expire(ALICE, USER_CUBE, sorted(expired), superseded_by="newer")
    erased = {ids[1] for ids in best.values()} - expired
    assert await p.forget(ALICE, USER_CUBE, sorted(erased)) == len(erased)
    for q in QUERIES:
        got = await top(p, q, n=40, cubes=[USER_CUBE])
        assert got and not set(got) & (expired | erased | others), q
    assert not p.cache.holds(await user_scope(engine))


def facts(n: int) -> list[MemoryCandidate]:
    return [MemoryCandidate(
        content=f"Alice likes {WORDS[i % 18]} with {WORDS[(7 * i + 3) % 18]} (fact {i})",
        source_event_ids=(f"f{i}",), event_time=T0, kind="fact") for i in range(n)]


async def facts_found(p: BuiltinProvider, q: str) -> list[str]:
    got = await p.search(ALICE, SearchRequest(query=q, cubes=[USER_CUBE], top_k=5,
                                              relativity=0.0, dedup=False, kinds=("fact",)))
    assert all(m.kind == "fact" for m in got)
    return [m.id for m in got]


async def test_a_search_of_facts_reads_the_facts_under_many_newer_episodes(
        engine: AsyncEngine) -> None:
    """A conflict check's search of a scope not held: the facts, older than every
    episode and outnumbered by them, are found as the held path finds them, however few
    postings a term and newest vectors the read takes; past the newest facts read
    among, a fact is still found by a rare word."""
    held = provider(engine)
    rare = (await held.add(ALICE, USER_CUBE, [MemoryCandidate(
        content="Alice is allergic to zanthoxylum", source_event_ids=("rare",),
        event_time=T0)])).ids[0]
    written = set((await held.add(ALICE, USER_CUBE, facts(24))).ids)
    await fill(held)  # 300 newer episodes sharing the facts' words
    tight = provider(engine, scope_hold_max=50, unheld=UnheldLimits(60, 50))
    for q in QUERIES:
        want = await facts_found(held, q)
        assert want and set(want) <= written, q
        assert await facts_found(tight, q) == want, q
    assert not tight.cache.holds(await user_scope(engine))
    few = provider(engine, scope_hold_max=50, unheld=UnheldLimits(60, 50, kind_memories=6))
    for q in QUERIES:  # facts only, among the newest 6 and each term's newest 60 postings
        got = set(await facts_found(few, q))
        assert got and got <= written, q
    # a rare word's postings are read whole: its fact is found at any age
    assert (await facts_found(few, "zanthoxylum allergy"))[:1] == [rare]


async def test_the_facts_are_found_by_an_index_never_a_scan_of_the_scope(
        engine: AsyncEngine) -> None:
    """The read of a search of some kinds goes through ``memory``'s index by scope and
    kind (migration 0021): it costs the memories of those kinds, not the scope's."""
    p = provider(engine)
    await p.add(ALICE, USER_CUBE, facts(3))
    await fill(p)
    among = UnheldReads(None).newest_of_kinds(await user_scope(engine), ["fact"])
    query = select(among.c.id)
    async with engine.connect() as conn:
        await conn.execute(text("ANALYZE TABLE memory"))
        sql = str(query.compile(engine.sync_engine, compile_kwargs={"literal_binds": True}))
        plan = [r._asdict() for r in await conn.execute(text("EXPLAIN " + sql))]
    reads = [r for r in plan if r["table"] == "memory"]
    assert reads and all(r["key"] == "ix_memory_scope_id_kind_valid_to"
                         and r["type"] == "ref" for r in reads), plan
