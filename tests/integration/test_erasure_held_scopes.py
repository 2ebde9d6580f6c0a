"""A finished erasure costs only its tenant, on MariaDB with two workers' runtimes.

Worker 1 carries erasures out (the real executor and built-in provider); worker 2
holds two tenants' cubes and learns of each erasure the way every worker does,
from the erasure log (:meth:`ErasureRegistry.refresh`). After tenant *loud*
erases one of its memories, then one of its users, worker 2 still holds tenant
*calm*'s cube (its searches load nothing again), while nothing erased comes back
from worker 2: the erased memory leaves the state of loud's cube, which stays held
and is brought forward without a whole load; the scopes of the erased user are no
longer held there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import event

from streams.erasure.executor import ErasureExecutor
from streams.memory.agent_configs import StaticAgentConfigs
from streams.memory.model import USER_CUBE, MemoryCandidate, agent_cube
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.builtin.gone_ids import READ_AT_MOST
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.providers.builtin.row_cache import Cached
from streams.memory.providers.builtin.scope_cache import ScopeCache
from streams.settings import DatabaseSettings, Settings
from streams.testing.erasure import FencePassingPublisher
from streams.wire.erasure import ErasureRequest
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring
from tests.support.services import create_database, drop_database, unique
from tests.support.wiring import settings_for_tests

CALM, LOUD, LOUD_2 = Scope("calm", "u1", "a1"), Scope("loud", "u1", "a1"), Scope("loud", "u2", "a1")


@asynccontextmanager
async def two_runtimes(prefix: str = "ms_held_") -> AsyncIterator[tuple[Runtime, Runtime]]:
    """Two workers' runtimes on one fresh MariaDB database (the first migrates it)."""
    database = unique(prefix)
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


@pytest.fixture
async def workers() -> AsyncIterator[tuple[Runtime, Runtime]]:
    async with two_runtimes() as both:
        yield both


def builtin(rt: Runtime) -> BuiltinProvider:
    provider = rt.providers.get("mysql").provider
    assert isinstance(provider, BuiltinProvider)
    return provider


async def search(rt: Runtime, scope: Scope, query: str, cube: str = USER_CUBE) -> list[str]:
    found = await builtin(rt).search(scope, SearchRequest(query, [cube], top_k=50,
                                                          relativity=0.0))
    return [m.content for m in found]


def held_tenants(rt: Runtime) -> list[tuple[str, str, str]]:
    """The scopes worker ``rt`` holds: tenant, cube, owner."""
    return sorted(builtin(rt).cache._keys.values())


def held_rows(rt: Runtime) -> set[tuple[str, str]]:
    """Tenant and user of the memory rows worker ``rt`` holds."""
    rows = builtin(rt).memories
    return {(Cached._make(r).tenant_id, Cached._make(r).user_id)
            for held in (rows._items, rows._fresh) for r in held.values()}


def eraser(rt: Runtime) -> ErasureExecutor:
    """The erasure executor of worker ``rt`` (the real one; its fences pass at once)."""
    wiring = Wiring(rt.settings, rt, publisher=FencePassingPublisher(
        rt.erasures.log, datetime.now(UTC)), agent_configs=StaticAgentConfigs({}),
        erasures=rt.erasures)

    async def offsets() -> dict[int, int]:
        return {0: 0}

    return wiring.erasure_processor(offsets, 1).executor


async def hold_loud(one: Runtime, two: Runtime, count: int,
                    ) -> tuple[list[str], ErasureExecutor, ScopeCache]:
    """Loud's cube of ``count`` notes written by worker 1 and held by worker 2 (searched
    once); their ids, worker 1's erasure executor and worker 2's scope cache."""
    writer, ids = builtin(one), []
    for at in range(0, count, 2_000):
        ids += (await writer.add(LOUD, USER_CUBE, [
            MemoryCandidate(f"loud note {i} about dogs")
            for i in range(at, min(at + 2_000, count))])).ids
    executor = eraser(one)
    await two.erasures.refresh()
    cache = builtin(two).cache
    assert len(await search(two, LOUD, "dogs")) == min(count, 50)
    assert cache.full_loads == 1
    return ids, executor, cache


async def test_an_erasure_drops_only_what_it_names(workers: tuple[Runtime, Runtime]) -> None:
    one, two = workers
    writer = builtin(one)
    await writer.add(CALM, USER_CUBE, [MemoryCandidate(f"calm note {i} about sailing")
                                       for i in range(300)])
    loud = (await writer.add(LOUD, USER_CUBE, [MemoryCandidate("I live in Oslo."),
                                               MemoryCandidate("My dog is called Rex.")])).ids
    await writer.add(LOUD, agent_cube("a1"), [MemoryCandidate("Users ask about Oslo.")])
    await writer.add(LOUD_2, USER_CUBE, [MemoryCandidate("I live in Lisbon.")])
    executor = eraser(one)
    await two.erasures.refresh()  # worker 2's first look (as it starts)
    cache = builtin(two).cache

    assert len(await search(two, CALM, "sailing")) == 50
    assert await search(two, LOUD, "dog") == ["My dog is called Rex."]
    assert await search(two, LOUD, "Oslo", agent_cube("a1")) == ["Users ask about Oslo."]
    assert await search(two, LOUD_2, "live") == ["I live in Lisbon."]
    assert cache.full_loads == 4

    # one memory of loud: only that memory goes, from the state that held it
    state = cache._states[next(sid for sid, key in cache._keys.items()
                               if key == ("loud", USER_CUBE, "u1"))]
    receipt = await executor.erase(ErasureRequest(
        erasure_id="m-1", tenant_id="loud", target="memory", memory_id=loud[1]))
    assert receipt.status == "done"
    await two.erasures.refresh()
    assert str(loud[1]) not in state.positions and str(loud[0]) in state.positions
    assert len(await search(two, CALM, "sailing")) == 50
    assert ("loud", USER_CUBE, "u1") in held_tenants(two)
    assert [k[0] for k in held_tenants(two)].count("loud") == 3
    assert await search(two, LOUD, "dog") == []
    assert await search(two, LOUD, "live") == ["I live in Oslo."]
    assert cache.full_loads == 4  # no cube was loaded again: loud's was brought forward
    assert ("loud", "u1") in held_rows(two)  # its other memory's row stays held

    # one user of loud: their profile and the agent cubes go, not u2's profile
    receipt = await executor.erase(ErasureRequest(
        erasure_id="u-1", tenant_id="loud", target="user", user_id="u1"))
    assert receipt.status == "done"
    await two.erasures.refresh()
    assert len(await search(two, CALM, "sailing")) == 50
    assert await search(two, LOUD_2, "live") == ["I live in Lisbon."]
    assert cache.full_loads == 4  # neither calm's cube nor u2's was loaded again
    assert held_tenants(two) == sorted([("calm", USER_CUBE, "u1"), ("loud", USER_CUBE, "u2")])
    assert await search(two, LOUD, "live") == []
    assert await search(two, LOUD, "Oslo", agent_cube("a1")) == []
    assert ("loud", "u1") not in held_rows(two) and ("calm", "u1") in held_rows(two)
    await two.erasures.refresh()  # told once: nothing more goes
    assert held_tenants(two) == sorted([("calm", USER_CUBE, "u1"), ("loud", USER_CUBE, "u2")])


async def test_a_search_before_the_erasure_is_heard_of_brings_the_cube_forward(
        workers: tuple[Runtime, Runtime]) -> None:
    """Worker 2 searches loud's cube after an erasure deleted one of its memories and
    before worker 2 read the erasure log: the cube is brought forward without a whole
    load (its count and version say a memory left; its id is found missing), the erased
    memory is not found; told of the erasure after, worker 2 changes nothing more."""
    one, two = workers
    writer = builtin(one)
    loud, executor, cache = await hold_loud(one, two, 40)
    receipt = await executor.erase(ErasureRequest(
        erasure_id="m-2", tenant_id="loud", target="memory", memory_id=loud[7]))
    assert receipt.status == "done"
    await writer.add(LOUD, USER_CUBE, [MemoryCandidate("a new loud note about dogs")])
    found = await search(two, LOUD, "dogs")  # worker 2 has not read the erasure log yet
    assert len(found) == 40 and "loud note 7 about dogs" not in found
    assert "a new loud note about dogs" in found
    assert cache.full_loads == 1 and cache.refreshes == 1
    await two.erasures.refresh()
    assert len(await search(two, LOUD, "dogs")) == 40
    assert cache.full_loads == 1
    state = cache._states[next(sid for sid, key in cache._keys.items()
                               if key == ("loud", USER_CUBE, "u1"))]
    assert state.doc_count == 40 and str(loud[7]) not in state.positions


async def test_memories_erased_before_the_notice_are_found_by_counting_not_by_reading(
        workers: tuple[Runtime, Runtime]) -> None:
    """A held cube of thousands whose memories were erased before worker 2 heard of it:
    brought forward by counting ranges of the held ids (a few queries of one row, a few
    ids read), not by reading every valid id of the cube on worker 2's event loop."""
    one, two = workers
    writer = builtin(one)
    loud, executor, cache = await hold_loud(one, two, 3_000)
    for n, memory_id in enumerate((loud[5], loud[2_222])):
        receipt = await executor.erase(ErasureRequest(
            erasure_id=f"m-{n}", tenant_id="loud", target="memory", memory_id=memory_id))
        assert receipt.status == "done"
    await writer.add(LOUD, USER_CUBE, [MemoryCandidate("a new loud note about dogs")])
    ids_read: list[int] = []

    def counted(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT MEMORY.ID"):
            ids_read.append(cursor.rowcount)

    event.listen(cache.engine.sync_engine, "after_cursor_execute", counted)
    try:
        found = await search(two, LOUD, "note 5 2222 new")  # before the erasure log is read
    finally:
        event.remove(cache.engine.sync_engine, "after_cursor_execute", counted)
    assert "loud note 5 about dogs" not in found and "loud note 2222 about dogs" not in found
    assert "a new loud note about dogs" in found
    assert cache.full_loads == 1 and cache.refreshes == 1
    state = cache._states[next(sid for sid, key in cache._keys.items()
                               if key == ("loud", USER_CUBE, "u1"))]
    assert state.doc_count == 2_999 and len(state.positions) == 2_999
    assert {str(loud[5]), str(loud[2_222])}.isdisjoint(state.positions)
    assert 0 < sum(ids_read) <= 2 * READ_AT_MOST, ids_read  # every valid id: 2,999
