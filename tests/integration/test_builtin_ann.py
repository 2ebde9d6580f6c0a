"""The graph of a large scope's vectors (``streams/memory/providers/builtin/ann.py``): it
proposes what the exact scan would, follows writes, and never brings back a memory
that was expired or erased."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.migrate import upgrade
from streams.memory.model import USER_CUBE, MemoryCandidate, agent_cube
from streams.memory.provider import ModelCaller, Scope, SearchRequest
from streams.memory.providers.builtin import ann
from streams.memory.providers.builtin.ann import AnnParams, VectorIndex
from streams.memory.providers.builtin.provider import BuiltinProvider

ALICE = Scope("acme", "alice", "helper")
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
WORDS = ["garden", "tea", "cello", "paris", "berlin", "hiking", "novel", "piano", "sister",
         "coffee", "train", "museum", "painting", "budget", "flight", "hotel", "river", "chess"]
QUERIES = ["Did Alice talk about the garden?", "piano and coffee", "What about Berlin hotel",
           "Bob hiking novel", "train museum painting budget", "chess by the river"]
EXACT = AnnParams(expansion_search=2048)  # wider than the scopes here: the graph finds all


class TopicEmbedder:
    """16-dimensional unit vectors: a direction per word, summed, plus a little noise
    from the text's hash (clustered like sentence embeddings, deterministic)."""

    name = "topic-test"
    dim = 16

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        out = []
        for t in texts:
            rng = np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16))
            v = 0.3 * rng.standard_normal(16)
            for i, w in enumerate(WORDS):
                if w in t.casefold():
                    v[i % 16] += 1.0
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def turns(session: int, n: int) -> list[MemoryCandidate]:
    return [MemoryCandidate(
        content=f"{('Alice', 'Bob')[i % 2]}: {WORDS[(i + session) % 18]} and "
                f"{WORDS[(5 * i + 2 * session) % 18]} ({session}.{i})",
        source_event_ids=(f"s{session}-t{i}",), event_time=T0, kind="episode")
        for i in range(n)]


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    eng = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}")
    try:
        await upgrade(eng)
        yield eng
    finally:
        await eng.dispose()


def graphed(engine: AsyncEngine, params: AnnParams = EXACT) -> BuiltinProvider:
    p = BuiltinProvider(engine, embedder=TopicEmbedder(), ann_min_vectors=50)
    p.cache.ann_params = params
    return p


async def results(p: BuiltinProvider, **kw: Any) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUERIES:
        got = await p.search(ALICE, SearchRequest(
            query=q, cubes=[USER_CUBE, agent_cube("helper")], top_k=12, relativity=0.0, **kw))
        out.append([(m.id, m.score) for m in got])
    return out


async def fill(p: BuiltinProvider, sessions: int = 12, per: int = 40) -> list[str]:
    ids: list[str] = []
    for s in range(sessions):
        ids += (await p.add(ALICE, USER_CUBE, turns(s, per))).ids
    return ids


async def test_a_graph_gives_the_exact_scans_results(engine: AsyncEngine) -> None:
    p = graphed(engine)
    await fill(p)
    exact = BuiltinProvider(engine, embedder=TopicEmbedder())
    await results(p)  # holds the scope; its graph is built in a thread meanwhile
    await p.cache.indexed()
    state = next(iter(p.cache._states.values()))
    assert state.ann is not None and len(state.ann) == 480
    assert await results(p) == await results(exact)


async def test_a_search_of_some_kinds_on_a_graphed_scope_scans_them_all(
        engine: AsyncEngine) -> None:
    p = graphed(engine, AnnParams(expansion_search=16))  # a narrow graph: it would miss some
    await fill(p)
    facts = [MemoryCandidate(content=f"Alice likes the {w}.", source_event_ids=(f"f-{w}",),
                             event_time=T0, kind="fact") for w in WORDS]
    await p.add(ALICE, USER_CUBE, facts)
    exact = BuiltinProvider(engine, embedder=TopicEmbedder())
    await results(p)
    await p.cache.indexed()
    assert next(iter(p.cache._states.values())).ann is not None
    got = await results(p, kinds=["fact"])
    assert got == await results(exact, kinds=["fact"])
    assert all(got) and len({m for r in got for m, _ in r}) > 6


def test_the_graph_finds_the_exact_best_with_the_shipped_parameters() -> None:
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((40, 64))
    data = (centres[rng.integers(0, 40, 20_000)] + 0.6 * rng.standard_normal((20_000, 64)))
    data = (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)
    index = VectorIndex.build(np.arange(20_000, dtype=np.int64) + 7, data)
    hits = 0
    for q in data[rng.integers(0, 20_000, 100)] + 0.1:
        q = (q / np.linalg.norm(q)).astype(np.float32)
        exact = set((np.argsort(-(data @ q))[:10] + 7).tolist())
        hits += len(exact & set(index.nearest(q, 10).tolist()))
        assert int(index.farthest(q)[0]) - 7 in np.argsort(data @ q)[:20]
    assert hits / 1000 >= 0.95  # docs/retrieval.md states the recall measured at scale


async def test_expired_and_erased_memories_never_come_back(engine: AsyncEngine) -> None:
    p = graphed(engine, AnnParams())
    ids = await fill(p)
    before = await results(p)
    await p.cache.indexed()
    best = {i for r in await results(p) for i, _ in r[:3]}
    await p.expire(ALICE, USER_CUBE, sorted(best), superseded_by=None)
    after = await results(p)
    assert not best & {i for r in after for i, _ in r}
    state = next(iter(p.cache._states.values()))
    assert state.ann is not None and not best & set(map(str, state.ann.keys().tolist()))
    gone = {i for r in after for i, _ in r[:2]}
    assert await p.forget(ALICE, USER_CUBE, sorted(gone)) == len(gone)
    for _ in range(2):  # scanned while the reloaded scope's graph is built, then graphed
        assert not (best | gone) & {i for r in await results(p) for i, _ in r}
        await p.cache.indexed()
    assert before and len(ids) == 480


async def test_the_graph_catches_up_with_writes_made_while_it_was_built(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = threading.Event()
    build = VectorIndex.build

    def slow(keys: Any, vectors: Any, params: AnnParams = EXACT) -> VectorIndex:
        gate.wait(10)
        return build(keys, vectors, params)

    monkeypatch.setattr(ann.VectorIndex, "build", staticmethod(slow))
    p = graphed(engine)
    ids = await fill(p, sessions=3)
    await results(p)  # the build waits at the gate
    more = (await p.add(ALICE, USER_CUBE, turns(7, 30))).ids
    await p.expire(ALICE, USER_CUBE, ids[:5] + more[:2], superseded_by=None)
    while_building = await results(p)  # brings the state forward; scanned exactly
    gate.set()
    await p.cache.indexed()
    state = next(iter(p.cache._states.values()))
    assert state.ann is not None
    assert state.ann.keys().tolist() == state.vec_ids.tolist()  # what the scope holds, exactly
    assert await results(p) == while_building
