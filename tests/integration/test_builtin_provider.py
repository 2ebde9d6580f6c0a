"""The built-in provider against MariaDB and SQLite, schema from the Alembic migrations."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.db.memory_schema import memory_scope_stats, memory_term
from streams.db.migrate import upgrade
from streams.domain.memory import USER_CUBE, MemoryCandidate, agent_cube
from streams.providers.base import (
    PermanentProviderError,
    RetryableProviderError,
    Scope,
    SearchRequest,
)
from streams.providers.builtin import BuiltinProvider
from tests.support.services import free_port, mysql_cli, mysql_url, unique

ALICE = Scope("acme", "alice", "helper")
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


class TableEmbedder:
    """A deterministic embedder: fixed vectors for known texts, a neutral one otherwise."""

    name = "table-test"
    dim = 3

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [self.table.get(t, [0.0, 0.0, 1.0]) for t in texts]


def fact(content: str, *sources: str, **kw: Any) -> MemoryCandidate:
    return MemoryCandidate(content=content, source_event_ids=sources or (content[:20],),
                           event_time=T0, **kw)


def request(query: str, cubes: Sequence[str] = (USER_CUBE,), **kw: Any) -> SearchRequest:
    return SearchRequest(query=query, cubes=list(cubes), relativity=0.0, **kw)


@pytest.fixture(params=["mariadb", "sqlite"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    if request.param == "sqlite":
        eng = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}")
        database = None
    else:
        database = unique("ms_mem_")
        mysql_cli(f"CREATE DATABASE {database} CHARACTER SET utf8mb4")
        eng = create_async_engine(mysql_url(database), pool_size=2)
    try:
        await upgrade(eng)
        yield eng
    finally:
        await eng.dispose()
        if database:
            mysql_cli(f"DROP DATABASE IF EXISTS {database}")


async def test_re_adding_the_same_memories_changes_nothing(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine)
    batch = [fact("Alice is allergic to peanuts", "e1"), fact("Alice plays the cello", "e2")]
    first = await p.add(ALICE, USER_CUBE, batch)
    again = await p.add(ALICE, USER_CUBE, [*batch, batch[0]])
    assert again.ids == [*first.ids, first.ids[0]]
    assert len(await p.history(ALICE, USER_CUBE)) == 2
    async with engine.connect() as conn:
        stats = (await conn.execute(select(memory_scope_stats))).one()
    assert stats.doc_count == 2
    found = await p.search(ALICE, request("peanuts allergy"))
    assert [m.id for m in found] == [first.ids[0]]


async def test_expired_memories_are_never_returned_but_stay_in_history(
    engine: AsyncEngine,
) -> None:
    p = BuiltinProvider(engine)
    old = (await p.add(ALICE, USER_CUBE, [fact("Alice lives in Paris", "e1")])).ids[0]
    new = (await p.add(ALICE, USER_CUBE, [fact("Alice lives in Berlin now", "e2")])).ids[0]
    assert {m.id for m in await p.search(ALICE, request("where does Alice live"))} == {old, new}

    await p.expire(ALICE, USER_CUBE, [old], superseded_by=new)
    await p.expire(ALICE, USER_CUBE, [old], superseded_by=new)  # repeated: no change

    for query in ("where does Alice live", "Paris"):
        assert [m.id for m in await p.search(ALICE, request(query))] in ([new], [])
    history = {m.id: m for m in await p.history(ALICE, USER_CUBE)}
    assert set(history) == {old, new}
    assert history[old].metadata["valid_to"] is not None
    assert history[old].metadata["superseded_by"] == new
    assert history[new].metadata["valid_to"] is None
    async with engine.connect() as conn:
        stats = (await conn.execute(select(memory_scope_stats))).one()
        postings = (await conn.execute(
            select(func.count()).where(memory_term.c.memory_id == int(old)))).scalar_one()
    assert (stats.doc_count, postings) == (1, 0)


async def test_a_tenant_never_sees_another_tenants_memories(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine)
    ids = (await p.add(ALICE, USER_CUBE, [fact("the vault code is 4711", "e1")])).ids
    await p.add(ALICE, agent_cube("helper"), [fact("the vault code is 4711", "e1", scope="agent")])
    for tenant in ("globex", "ACME", "acmé"):
        other = Scope(tenant, ALICE.user_id, ALICE.agent_id)
        got = await p.search(other, request("vault code", [USER_CUBE, agent_cube("helper")]))
        assert got == []
        assert await p.get(other, ids) == []
        assert await p.history(other, USER_CUBE) == []
    assert [m.id for m in await p.get(ALICE, ids)] == ids
    with pytest.raises(PermanentProviderError):  # MySQL would ignore the trailing space
        await p.search(Scope("acme ", "alice", "helper"), request("vault code"))


async def test_agent_cube_is_shared_by_the_agents_users_and_no_other_agent(
    engine: AsyncEngine,
) -> None:
    p = BuiltinProvider(engine)
    cube = agent_cube("helper")
    await p.add(ALICE, cube, [fact("refunds need the order number", "e1", scope="agent")])
    await p.add(ALICE, USER_CUBE, [fact("Alice wants refunds by bank transfer", "e2")])
    bob = Scope("acme", "bob", "helper")
    alice_elsewhere = Scope("acme", "alice", "other")

    got = await p.search(bob, request("refunds", [USER_CUBE, cube]))
    assert [m.content for m in got] == ["refunds need the order number"]
    got = await p.search(alice_elsewhere, request("refunds", [USER_CUBE, cube]))
    assert [m.content for m in got] == ["Alice wants refunds by bank transfer"]
    with pytest.raises(PermanentProviderError):
        await p.add(alice_elsewhere, cube, [fact("sneaky", "e3", scope="agent")])


async def test_keyword_only_really_switches_off_the_dense_signal(engine: AsyncEngine) -> None:
    puppy = "Alice adopted a puppy last spring"
    shop = "Alice walked past the pet shop"
    query = "what pet does Alice have"
    emb = TableEmbedder({puppy: [1.0, 0.0, 0.0], shop: [0.0, 1.0, 0.0], query: [1.0, 0.0, 0.0]})
    p = BuiltinProvider(engine, embedder=emb)
    await p.add(ALICE, USER_CUBE, [fact(puppy, "e1"), fact(shop, "e2")])

    hybrid = await p.search(ALICE, request(query))
    calls = emb.calls
    lexical = await p.search(ALICE, request(query, keyword_only=True))
    assert hybrid[0].content == puppy
    assert lexical[0].content == shop
    assert emb.calls == calls  # keyword-only does not even embed the query
    assert all(0.0 <= m.score <= 1.0 for m in hybrid + lexical)


async def test_dense_cache_follows_writes_and_expiries(engine: AsyncEngine) -> None:
    emb = TableEmbedder({"Alice drives a red bicycle": [1.0, 0.0, 0.0], "transport?": [1, 0, 0]})
    p = BuiltinProvider(engine, embedder=emb)
    await p.add(ALICE, USER_CUBE, [fact("Alice likes tea", "e1")])
    # the first search caches the scope's vectors; the write below must refresh them
    assert [m.content for m in await p.search(ALICE, request("transport?"))] == [
        "Alice likes tea"]
    bike = (await p.add(ALICE, USER_CUBE, [fact("Alice drives a red bicycle", "e2")])).ids[0]
    assert (await p.search(ALICE, request("transport?")))[0].id == bike
    await p.expire(ALICE, USER_CUBE, [bike], None)
    assert bike not in {m.id for m in await p.search(ALICE, request("transport?"))}


async def test_a_query_reads_only_the_postings_of_its_terms(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine)
    await p.add(ALICE, USER_CUBE, [fact(f"note {i} about topic{i % 7} and gardening", f"n{i}")
                                   for i in range(40)])
    await p.add(Scope("globex", "alice", "helper"), USER_CUBE,
                [fact("gardening tips from another tenant", "x1")])
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        got = await p.search(ALICE, request("Which gardening topic3 notes?", top_k=5))
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    assert got and all("topic3" in m.content for m in got[:3])

    posting_reads = [(s, prm) for s, prm in seen if "memory_term" in s]
    assert len(posting_reads) == 1
    statement, params = posting_reads[0]
    values = list(params.values()) if isinstance(params, dict) else list(params)
    terms = {v for v in values if isinstance(v, str)}
    assert terms == {"garden", "topic3", "note"}  # stemmed query terms, nothing else
    assert " IN " in statement.upper()
    for s, _ in seen:  # every read of memory rows is by primary key or scope-bounded
        if "FROM memory " in s or "FROM memory\n" in s:
            assert "memory.id IN" in s


async def test_chinese_text_without_spaces_is_found(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine)
    await p.add(ALICE, USER_CUBE, [fact("我喜欢在周末去爬山", "c1"),
                                   fact("我每天早上喝咖啡", "c2")])
    got = await p.search(ALICE, request("周末爬山"))
    assert got[0].content == "我喜欢在周末去爬山"


async def test_episodes_of_one_call_form_a_session_with_neighbours(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine)
    turns = [
        MemoryCandidate(content=c, source_event_ids=(f"t{i}",), event_time=T0, kind="episode")
        for i, c in enumerate([
            "Bob: Did you ever find a new hobby?",
            "Alice: Yes, pottery! I made a bowl for my mum.",
            "Bob: That sounds lovely.",
            "Alice: The weather was awful today.",
        ])
    ]
    ids = (await p.add(ALICE, USER_CUBE, turns)).ids
    got = await p.search(ALICE, request("What new hobby did Alice find?", top_k=4))
    order = [m.id for m in got]
    assert order[0] == ids[0]
    assert order.index(ids[1]) < order.index(ids[3])  # the answer rides on its question
    assert [m.metadata["seq"] for m in await p.get(ALICE, ids)] == [0, 1, 2, 3]


async def test_database_errors_are_classified(engine: AsyncEngine) -> None:
    if engine.dialect.name == "mysql":
        down = create_async_engine(mysql_url("nothing", port=free_port()))
        with pytest.raises(RetryableProviderError):
            await BuiltinProvider(down).search(ALICE, request("anything"))
        await down.dispose()
    async with engine.begin() as conn:
        await conn.execute(memory_term.delete())
        await conn.exec_driver_sql("DROP TABLE memory_term")
    with pytest.raises(PermanentProviderError):
        await BuiltinProvider(engine).add(ALICE, USER_CUBE, [fact("x y z", "e9")])
