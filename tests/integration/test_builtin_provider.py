"""The built-in provider against MariaDB and SQLite, schema from the Alembic migrations."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import event, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema.memory import memory, memory_scope_stats, memory_term
from streams.memory.model import USER_CUBE, MemoryCandidate, agent_cube
from streams.memory.provider import (
    ModelCaller,
    PermanentProviderError,
    RetryableProviderError,
    Scope,
    SearchRequest,
)
from streams.memory.providers.builtin import scope_cache, writes
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.providers.builtin.row_features import RowFeatures, decode, derive
from streams.query.line_counts import BudgetLineCounts
from streams.query.rules.budget import filter_and_trim, memory_line, pack_budget
from streams.tokens import TokenCounter
from tests.support.services import create_database, drop_database, free_port, mysql_url, unique

ALICE = Scope("acme", "alice", "helper")
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


class TableEmbedder:
    """A deterministic embedder: fixed vectors for known texts, a neutral one otherwise."""

    name = "table-test"
    dim = 3

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.calls = 0

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        self.calls += 1
        return [self.table.get(t, [0.0, 0.0, 1.0]) for t in texts]


def fact(content: str, *sources: str, **kw: Any) -> MemoryCandidate:
    return MemoryCandidate(content=content, source_event_ids=sources or (content[:20],),
                           event_time=T0, **kw)


def request(query: str, cubes: Sequence[str] = (USER_CUBE,), **kw: Any) -> SearchRequest:
    return SearchRequest(query=query, cubes=list(cubes), relativity=0.0, **kw)


@contextmanager
def statements(engine: AsyncEngine) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements (and parameters) run on ``engine`` inside the block."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


@pytest.fixture(params=["mariadb", "sqlite"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    if request.param == "sqlite":
        eng = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}")
        database = None
    else:
        database = unique("ms_mem_")
        eng = create_async_engine(create_database(database), pool_size=2)
    try:
        await upgrade(eng)
        yield eng
    finally:
        await eng.dispose()
        if database:
            drop_database(database)


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


async def test_an_expired_memory_written_again_is_stored_anew_and_the_cache_follows(
        engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine)
    paris, rome = (await p.add(ALICE, USER_CUBE, [fact("Alice lives in Paris", "e1"),
                                                  fact("Alice visited Rome", "e2")])).ids
    assert {m.id for m in await p.search(ALICE, request("Alice Paris Rome"))} == {paris, rome}
    await p.expire(ALICE, USER_CUBE, [paris], superseded_by=None)
    assert {m.id for m in await p.search(ALICE, request("Alice Paris Rome"))} == {rome}
    # written again (a rebuild from the history): valid, under a new id, while another
    # memory is expired in the same interval, so the scope's counts balance out
    again = (await p.add(ALICE, USER_CUBE, [fact("Alice lives in Paris", "e1")])).ids[0]
    await p.expire(ALICE, USER_CUBE, [rome], superseded_by=None)
    assert again != paris
    assert [m.id for m in await p.search(ALICE, request("Alice Paris Rome"))] == [again]
    cold = BuiltinProvider(engine)
    assert [m.id for m in await cold.search(ALICE, request("Alice Paris Rome"))] == [again]
    history = {m.id: m for m in await p.history(ALICE, USER_CUBE)}
    assert set(history) == {paris, rome, again}
    assert history[paris].metadata["valid_to"] is not None  # the old row stays, as history
    # and once valid, writing it again is idempotent as ever
    assert (await p.add(ALICE, USER_CUBE, [fact("Alice lives in Paris", "e1")])).ids == [again]


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


async def test_each_cube_is_ranked_on_its_own(engine: AsyncEngine) -> None:
    """The user's memories match the query better and are many; the agent's lesson
    still scores 1.0 in its own cube (ranked together it fell under the relativity)."""
    p = BuiltinProvider(engine)
    cube = agent_cube("helper")
    await p.add(ALICE, cube, [fact("The flights API needs ISO dates.", "a1", scope="agent")]
                + [fact(f"Refund rule {i} for trains.", f"a{i + 2}", scope="agent")
                   for i in range(6)])
    await p.add(ALICE, USER_CUBE, [fact(f"Alice flew to Lisbon, trip {i}.", f"u{i}")
                                   for i in range(8)])
    got = await p.search(ALICE, SearchRequest("flights to Lisbon", [USER_CUBE, cube],
                                              relativity=0.45))
    by_cube = {m.cube: m for m in reversed(got)}
    assert by_cube[cube].content == "The flights API needs ISO dates."
    assert by_cube[cube].score == 1.0 and by_cube[USER_CUBE].score == 1.0


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


async def test_a_scope_is_read_once_then_searched_from_the_worker(engine: AsyncEngine) -> None:
    """The first search loads the scope's rows (within the scope) and indexes their text:
    no posting of a word is read; subject terms, which no text holds, are read by name.
    The scope held, a search reads the statistics and the rows of its picks, no more."""
    p = BuiltinProvider(engine, row_cache_rows=0)
    await p.add(ALICE, USER_CUBE, [fact(f"note {i} about topic{i % 7} and gardening", f"n{i}",
                                        subjects=("§hobby",) if i == 3 else ())
                                   for i in range(40)])
    await p.add(Scope("globex", "alice", "helper"), USER_CUBE,
                [fact("gardening tips from another tenant", "x1")])

    with statements(engine) as seen:
        got = await p.search(ALICE, request("Which gardening topic3 notes?", top_k=5))
    assert got and all("topic3" in m.content for m in got[:3])
    assert [s for s, _ in seen if "memory_term" in s] == []
    for s, _ in seen:  # every read of memory rows is by primary key or within the scope
        if "FROM memory " in s or "FROM memory\n" in s:
            assert "memory.id IN" in s or "memory.scope_id = " in s

    with statements(engine) as again:
        assert [m.id for m in await p.search(ALICE, request("Which gardening topic3 notes?",
                                                            top_k=5))] == [m.id for m in got]
    assert [s for s, _ in again if "memory_term" in s] == []
    assert all("memory.id IN" in s for s, _ in again if "FROM memory " in s
               or "FROM memory\n" in s)  # the picks' rows (no row cache here), nothing else

    with statements(engine) as subject:
        found = await p.search(ALICE, request("anything", subjects=("§hobby",), top_k=5))
    assert [m.content for m in found] == ["note 3 about topic3 and gardening"]
    posting_reads = [(s, prm) for s, prm in subject if "memory_term" in s]
    assert len(posting_reads) == 1
    values = posting_reads[0][1]
    values = list(values.values()) if isinstance(values, dict) else list(values)
    assert {v for v in values if isinstance(v, str)} == {"§hobby"}  # the subject, no word
    with statements(engine) as held:
        await p.search(ALICE, request("anything", subjects=("§hobby",), top_k=5))
    assert [s for s, _ in held if "memory_term" in s] == []


async def test_chinese_text_without_spaces_is_found(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine)
    await p.add(ALICE, USER_CUBE, [fact("我喜欢在周末去爬山", "c1"),
                                   fact("我每天早上喝咖啡", "c2")])
    got = await p.search(ALICE, request("周末爬山"))
    assert got[0].content == "我喜欢在周末去爬山"


async def test_a_fact_is_found_by_its_subject_and_never_crowded_out_by_episodes(
    engine: AsyncEngine,
) -> None:
    """The conflict lookup of a correction: "I moved to Lisbon" shares no word with
    "I live in Porto", and small talk shares "move" with it; by its subject term,
    among facts only, the stored fact is found."""
    provider = BuiltinProvider(engine)
    await provider.add(ALICE, USER_CUBE, [
        fact("I live in Porto.", "e1", subjects=("§residence",)),
        fact("I work at Siemens.", "e2", subjects=("§employer",))])
    await provider.add(ALICE, USER_CUBE, [
        MemoryCandidate(content=f"User: We move the meeting again, take {i}.", kind="episode",
                        source_event_ids=(f"x{i}",), event_time=T0) for i in range(20)])
    said = "Actually I moved to Lisbon."
    plain = await provider.search(ALICE, request(said, top_k=5, dedup=False))
    assert len(plain) == 5 and all(m.kind == "episode" for m in plain)
    found = await provider.search(ALICE, request(said, top_k=5, dedup=False, kinds=("fact",),
                                                 subjects=("§residence",)))
    assert [m.content for m in found] == ["I live in Porto."]
    episodes = await provider.search(ALICE, request("move meeting", kinds=("episode",)))
    assert episodes and all(m.kind == "episode" for m in episodes)
    assert await provider.search(ALICE, request("Porto", kinds=("episode",))) == []


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


async def test_what_holding_a_memory_needs_is_stored_with_it_and_read_as_derived(
        engine: AsyncEngine) -> None:
    """Each memory's features are stored when it is written (0022), as its text gives
    them; a scope held from them answers as one held from the text (rows stored without
    them, as before 0022)."""
    p = BuiltinProvider(engine)
    long_answer = ("Sure, here is the loader:\n```python\ndef load(path):\n"
                   "    return open(path).read()\n```\n" + "It reads the file once. " * 60)
    await p.add(ALICE, USER_CUBE, [
        MemoryCandidate(content=c, source_event_ids=(f"f{i}",), event_time=T0, kind="episode",
                        role=role)
        for i, (c, role) in enumerate([
            ("Alice: From now on, answer in Spanish.", "user"),
            ("Alice: We switched the deadline to 14 May, latency is now 250 ms.", "user"),
            (long_answer, "assistant"),
            ("我喜欢在周末去爬山，咖啡很好喝。", "user"),
        ])])
    await p.add(ALICE, USER_CUBE, [fact("Alice's deadline is 14 May", "f9",
                                        subjects=("§deadline",))])
    async with engine.connect() as conn:
        rows = (await conn.execute(select(memory))).all()
    assert len(rows) == 5
    for r in rows:
        assert decode(r.features) == derive(r.content, r.role)
    asks = ["deadline latency", "loader file python", "周末爬山", "Spanish answers", "250 ms"]
    stored = [[(m.id, round(m.score, 9)) for m in await BuiltinProvider(engine).search(
        ALICE, request(q, top_k=5))] for q in asks]
    async with engine.begin() as conn:
        await conn.execute(update(memory).values(features=None))
    derived = [[(m.id, round(m.score, 9)) for m in await BuiltinProvider(engine).search(
        ALICE, request(q, top_k=5))] for q in asks]
    assert stored == derived and all(stored)


async def test_a_long_add_is_analysed_off_the_event_loop(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """An add of short memories is analysed on the loop; one of long answers (as a
    consolidation's chunk of an agent conversation is) in a thread, so the queries the
    loop answers meanwhile are not held up by it."""
    analysed: list[int] = []

    def derive_noting(content: str, role: str | None) -> RowFeatures:
        analysed.append(threading.get_ident())
        return derive(content, role)

    monkeypatch.setattr(writes, "derive", derive_noting)
    p = BuiltinProvider(engine)
    loop = threading.get_ident()
    await p.add(ALICE, USER_CUBE, [fact(f"Alice likes tea number {i}", f"t{i}")
                                   for i in range(5)])
    assert analysed and set(analysed) == {loop}
    analysed.clear()
    long = [fact(f"Answer {i}: " + "the loader reads each part of the file once. " * 40,
                 f"l{i}") for i in range(10)]
    ids = (await p.add(ALICE, USER_CUBE, long)).ids
    assert len(analysed) == 10 and loop not in analysed
    assert [m.id for m in await p.search(ALICE, request("Answer 7 loader", top_k=1))] == [ids[7]]


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


# ------------------------------------------------------ the incremental scope cache
class HashEmbedder:
    """Deterministic 8-dimensional unit vectors from the text, for any text."""

    name = "hash-test"
    dim = 8

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None  # when set, embedding waits for it

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        if self.gate is not None:
            await self.gate.wait()
        out = []
        for t in texts:
            v = np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16))
            row = v.standard_normal(8)
            out.append((row / np.linalg.norm(row)).tolist())
        return out


WORDS = ["garden", "tea", "cello", "paris", "berlin", "hiking", "novel", "piano", "sister",
         "coffee", "train", "museum", "painting", "budget", "flight", "hotel"]


def turns(session: int, n: int, offset: int = 0) -> list[MemoryCandidate]:
    return [MemoryCandidate(
        content=f"{('Alice', 'Bob')[i % 2]}: {WORDS[(i + session) % 16]} and "
                f"{WORDS[(3 * i + session) % 16]} {i + offset}",
        source_event_ids=(f"s{session}-t{i + offset}",), event_time=T0, kind="episode")
        for i in range(n)]


QUERIES = ["Did Alice talk about the garden?", "piano and coffee", "What about Berlin hotel",
           "Bob hiking novel", "train museum painting budget"]


async def results(p: BuiltinProvider, scope: Scope = ALICE) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUERIES:
        for kw in (False, True):
            got = await p.search(scope, request(q, [USER_CUBE, agent_cube("helper")], top_k=12,
                                                keyword_only=kw))
            out.append([(m.id, m.score) for m in got])
    return out


async def test_the_cache_follows_adds_and_expiries_exactly_as_a_cold_one(
    engine: AsyncEngine,
) -> None:
    emb = HashEmbedder()
    warm = BuiltinProvider(engine, embedder=emb)
    ids = (await warm.add(ALICE, USER_CUBE, turns(1, 30))).ids
    await warm.add(ALICE, agent_cube("helper"), [fact("the helper keeps a garden diary", "a1",
                                                      scope="agent")])
    assert await results(warm) == await results(BuiltinProvider(engine, embedder=emb))

    steps: list[Callable[[], Awaitable[Any]]] = [
        lambda: warm.add(ALICE, USER_CUBE, turns(1, 10, offset=30)),  # the session goes on
        lambda: warm.add(ALICE, USER_CUBE, turns(2, 12)),
        lambda: warm.expire(ALICE, USER_CUBE, [ids[3], ids[17]], superseded_by=None),
        lambda: warm.add(ALICE, USER_CUBE, [fact("Alice sold her piano", "f1"),
                                            fact("Alice drinks coffee black", "f2")]),
        lambda: warm.expire(ALICE, USER_CUBE, [ids[29]], superseded_by=None),
    ]
    for step in steps:
        await step()
        assert await results(warm) == await results(BuiltinProvider(engine, embedder=emb))
    assert warm.cache.full_loads == 2  # each scope loaded once, then only brought forward
    assert warm.cache.refreshes == len(steps)


async def test_a_version_bump_reads_only_what_changed(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine, embedder=HashEmbedder())
    ids = (await p.add(ALICE, USER_CUBE, turns(1, 40))).ids
    await results(p)  # holds the scope: rows, vectors and the queries' postings
    last = max(int(i) for i in ids)
    await p.add(ALICE, USER_CUBE, turns(2, 3))

    with statements(engine) as seen:
        await results(p)
    vector_reads = [(s, prm) for s, prm in seen if "FROM memory_embedding" in s]
    assert len(vector_reads) == 1
    statement, params = vector_reads[0]
    assert "memory_embedding.memory_id > " in statement
    values = params.values() if isinstance(params, dict) else params
    assert last in values
    memory_reads = [s for s, _ in seen if "FROM memory " in s or "FROM memory\n" in s]
    assert memory_reads and all("memory.id > " in s or "memory.id IN" in s
                                for s in memory_reads)
    # their words are indexed from their text; no subject term is held, so no posting read
    assert [s for s, _ in seen if "FROM memory_term" in s] == []
    await p.search(ALICE, request("garden", subjects=("§hobby",)))  # now one is held
    newer = (await p.add(ALICE, USER_CUBE, [fact("Alice paints", "p1", subjects=("§hobby",))])).ids
    with statements(engine) as seen:
        assert [m.id for m in await p.search(ALICE, request("x", subjects=("§hobby",),
                                                            keyword_only=True))] == newer
    term_reads = [prm for s, prm in seen if "FROM memory_term" in s]
    assert len(term_reads) == 1  # the new memories' postings of the held subject, by id
    values = term_reads[0].values() if isinstance(term_reads[0], dict) else term_reads[0]
    assert {int(i) for i in newer} <= {v for v in values if isinstance(v, int)}
    assert "§hobby" in set(values)

    await p.expire(ALICE, USER_CUBE, [ids[5]], superseded_by=None)
    with statements(engine) as seen:
        got = await results(p)
    assert [s for s, _ in seen if "FROM memory_embedding" in s or "FROM memory_term" in s] == []
    assert all(ids[5] not in {i for i, _ in r} for r in got)
    assert p.cache.full_loads == 1


async def test_searches_of_a_stale_scope_share_one_refresh(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine, embedder=HashEmbedder())
    await p.add(ALICE, USER_CUBE, turns(1, 20))
    await results(p)
    await p.add(ALICE, USER_CUBE, turns(2, 5))
    with statements(engine) as seen:
        found = await asyncio.gather(*(p.search(ALICE, request(q)) for q in QUERIES * 4))
    assert all(found)
    assert len([s for s, _ in seen if "FROM memory_embedding" in s]) == 1
    assert (p.cache.full_loads, p.cache.refreshes) == (1, 1)


async def test_no_connection_is_held_while_the_query_is_embedded(
    engine: AsyncEngine, tmp_path: Path,
) -> None:
    if engine.dialect.name != "mysql":
        pytest.skip("the pool limit is MySQL's")
    small = create_async_engine(engine.url.render_as_string(hide_password=False), pool_size=1,
                                max_overflow=0, pool_timeout=1)
    try:
        emb = HashEmbedder()
        p = BuiltinProvider(small, embedder=emb)
        await p.add(ALICE, USER_CUBE, turns(1, 10))
        emb.gate = asyncio.Event()
        waiting = [asyncio.create_task(p.search(ALICE, request(q))) for q in QUERIES]
        await asyncio.sleep(0.2)
        assert not any(t.done() for t in waiting)  # all wait for their query vector
        assert len(await p.history(ALICE, USER_CUBE)) == 10  # while the one connection is free
        emb.gate.set()
        assert all(await asyncio.gather(*waiting))
    finally:
        await small.dispose()


# ------------------------------------------------------------------- metrics
def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_calls_are_counted_in_the_provider_metrics(engine: AsyncEngine) -> None:
    p = BuiltinProvider(engine)
    ops = ("add", "search", "expire", "get", "history")
    before = {op: sample("memstream_provider_requests_total", provider="mysql", operation=op)
              for op in ops}
    timed = sample("memstream_provider_request_seconds_count", provider="mysql",
                   operation="search")
    ids = (await p.add(ALICE, USER_CUBE, [fact("Alice plays the cello", "e1")])).ids
    await p.search(ALICE, request("cello"))
    await p.get(ALICE, ids)
    await p.history(ALICE, USER_CUBE)
    await p.expire(ALICE, USER_CUBE, ids, superseded_by=None)
    for op in ops:
        assert sample("memstream_provider_requests_total", provider="mysql",
                      operation=op) == before[op] + 1
    assert sample("memstream_provider_request_seconds_count", provider="mysql",
                  operation="search") == timed + 1

    failed = sample("memstream_provider_failures_total", provider="mysql", operation="add",
                    error="PermanentProviderError")
    with pytest.raises(PermanentProviderError):
        await p.add(ALICE, "agent_someone_else", [fact("sneaky", "e2")])
    assert sample("memstream_provider_failures_total", provider="mysql", operation="add",
                  error="PermanentProviderError") == failed + 1


async def test_the_scopes_held_stay_within_the_limit_the_least_recently_searched_first(
    engine: AsyncEngine,
) -> None:
    """``vector_cache_rows`` (the worker's ``scope_cache_memories``) bounds the memories
    of the scopes held: a scope that does not fit pushes out the least recently searched
    one, which is read again when it is searched next; the gauge counts what is held."""
    bob = Scope("acme", "bob", "helper")
    p = BuiltinProvider(engine, vector_cache_rows=50, row_cache_rows=0)
    for who in (ALICE, bob):
        await p.add(who, USER_CUBE, [fact(f"{who.user_id} note {i} about gardening",
                                          f"{who.user_id}-{i}") for i in range(30)])

    await p.search(ALICE, request("gardening"))
    assert (p.cache.full_loads, sample("memstream_scope_cache_memories")) == (1, 30)
    await p.search(bob, request("gardening"))  # 60 > 50: Alice's scope goes
    assert (p.cache.full_loads, sample("memstream_scope_cache_memories")) == (2, 30)
    await p.search(bob, request("gardening"))
    assert p.cache.full_loads == 2  # held
    found = await p.search(ALICE, request("gardening"))
    assert p.cache.full_loads == 3  # read again
    assert found and all(m.content.startswith("alice") for m in found)


async def test_a_search_given_up_while_its_scope_loads_leaves_the_load_to_finish(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A query's deadline cancels its search, never the load of a scope: a scope too large
    to load within one deadline is loaded once, and the next search finds it held."""
    p = BuiltinProvider(engine)
    await p.add(ALICE, USER_CUBE, [fact(f"note {i} about gardening", f"n{i}") for i in range(30)])
    loading, go_on = asyncio.Event(), asyncio.Event()
    load = p.cache._load

    async def slow_load(conn: Any, stats: Any) -> Any:
        loading.set()
        await go_on.wait()
        return await load(conn, stats)

    monkeypatch.setattr(p.cache, "_load", slow_load)
    search = asyncio.create_task(p.search(ALICE, request("gardening")))
    await asyncio.wait_for(loading.wait(), 5)
    search.cancel()  # the deadline
    with pytest.raises(asyncio.CancelledError):
        await search
    go_on.set()
    for _ in range(100):
        if p.cache.full_loads:
            break
        await asyncio.sleep(0.05)
    assert p.cache.full_loads == 1
    assert await p.search(ALICE, request("gardening"))
    assert p.cache.full_loads == 1  # held: not loaded again


@pytest.mark.parametrize("in_thread", [True, False])
async def test_the_budget_lines_of_the_rows_read_are_counted_before_a_query_meets_them(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch, in_thread: bool,
) -> None:
    """As the worker wires it: a scope's load (in its thread, or on the event loop when
    small) and its refreshes count each memory's budget line into the worker's counter,
    so the budget of a query over the scope counts none of them itself."""
    monkeypatch.setattr(scope_cache, "BUILD_OFF_LOOP", 1 if in_thread else 10**9)
    counter = TokenCounter()
    on_the_way: list[str] = []  # what the budget had to count itself
    count = counter._count.compute
    counter._count.compute = lambda text: on_the_way.append(text) or count(text)
    p = BuiltinProvider(engine, rows_read=BudgetLineCounts(counter, max_chars=60))
    await p.add(ALICE, USER_CUBE, [*turns(1, 12), fact(
        "Alice  moved to\tLisbon in May, and the garden there is " + "much larger " * 5, "f1")])

    async def budget_lines() -> list[str]:
        found = filter_and_trim(await p.search(ALICE, request("Alice garden Lisbon coffee")),
                                max_chars=60)
        packed = pack_budget(found, budget_tokens=4000, count=counter)
        assert len(packed.included) == len(found) > 0
        return [memory_line(m.kind, m.content, m.event_time) for m in found]

    lines = await budget_lines()
    assert any(len(line) > 60 for line in lines)  # the fact's date and its cut text
    assert not set(lines) & set(on_the_way)
    assert all(not t.endswith("\n") or t == "[2024-03-01]\n" for t in on_the_way)

    await p.add(ALICE, USER_CUBE, [fact("Alice grows coffee in the Lisbon garden", "f2")])
    lines = await budget_lines()  # a refresh read the new memory
    assert p.cache.refreshes == 1
    assert "[2024-03-01] Alice grows coffee in the Lisbon garden\n" in lines
    assert not set(lines) & set(on_the_way)


async def test_what_a_load_read_before_an_erasure_dropped_the_caches_is_not_held(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An erasure drops every worker's caches (``Runtime.drop_caches``). A scope load
    whose reads began before may have read erased memories: it answers its search, and
    nothing of it is held — no scope state, no row, no budget line's count."""
    monkeypatch.setattr(scope_cache, "BUILD_OFF_LOOP", 1)
    counter = TokenCounter()
    p = BuiltinProvider(engine, rows_read=BudgetLineCounts(counter, max_chars=1000))
    await p.add(ALICE, USER_CUBE, [fact(f"note {i} about gardening", f"n{i}") for i in range(30)])
    building, go_on = threading.Event(), threading.Event()
    build = p.cache._build

    def slow_build(st: Any, rows: Any) -> Any:
        building.set()
        go_on.wait(10)
        return build(st, rows)

    monkeypatch.setattr(p.cache, "_build", slow_build)
    search = asyncio.create_task(p.search(ALICE, request("gardening", top_k=30)))
    assert await asyncio.to_thread(building.wait, 10)
    p.drop_caches()
    counter.clear()
    go_on.set()
    assert len(await search) == 30  # its caller is answered
    assert (p.cache.full_loads, len(p.cache._states), len(p.memories), len(counter._count)) \
        == (0, 0, 0, 0)
    monkeypatch.setattr(p.cache, "_build", build)
    assert len(await p.search(ALICE, request("gardening", top_k=30))) == 30
    assert (p.cache.full_loads, len(p.cache._states), len(p.memories), len(counter._count)) \
        == (1, 1, 30, 30)


async def test_rows_a_search_read_before_an_erasure_dropped_the_caches_are_not_held(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rows of a held scope's picks that the memory cache lacks are read in the
    search's transaction: read before an erasure dropped the caches, they serve that
    search only."""
    p = BuiltinProvider(engine)
    await p.add(ALICE, USER_CUBE, [fact(f"note {i} about gardening", f"n{i}") for i in range(30)])
    await p.search(ALICE, request("gardening", top_k=30))
    p.memories.clear()  # the scope held, its rows not: the picks' rows are read
    get = p.memories.get

    async def dropped_meanwhile(*args: Any) -> Any:
        p.drop_caches()
        return await get(*args)

    monkeypatch.setattr(p.memories, "get", dropped_meanwhile)
    assert len(await p.search(ALICE, request("gardening", top_k=30))) == 30
    assert len(p.memories) == 0
    monkeypatch.setattr(p.memories, "get", get)
    assert len(await p.search(ALICE, request("gardening", top_k=30))) == 30
    assert len(p.memories) == 30
