"""The connection a worker keeps for the scope reads that open its searches, on
MariaDB: the latest committed versions every time, no pooled connection for a
search of held scopes, and a broken, busy, cancelled or closed connection never
in a search's way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import Select, event, func, literal, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from streams.adapters.db.migrate import upgrade
from streams.memory.model import USER_CUBE, MemoryCandidate
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.builtin.held_reads import HeldReads
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.providers.builtin.rows import DbRow
from streams.settings import DatabaseSettings, Settings
from streams.worker.runtime import Runtime
from tests.support.services import create_database, drop_database, unique

ALICE = Scope("acme", "alice", "helper")
QUESTION = SearchRequest(query="Where does Alice go hiking?", cubes=[USER_CUBE],
                         relativity=0.0, top_k=5)


@pytest.fixture
async def engines() -> AsyncIterator[tuple[AsyncEngine, AsyncEngine]]:
    """The pooled engine, and the held reader's own engine (no pool)."""
    database = unique("ms_held_")
    url = create_database(database)
    pooled = create_async_engine(url, pool_size=2)
    own = create_async_engine(url, poolclass=NullPool)
    try:
        await upgrade(pooled)
        yield pooled, own
    finally:
        await pooled.dispose()
        await own.dispose()
        drop_database(database)


def notes(*texts: str) -> list[MemoryCandidate]:
    return [MemoryCandidate(content=t, source_event_ids=(t[:20],)) for t in texts]


async def hiker(pooled: AsyncEngine, held: HeldReads) -> BuiltinProvider:
    """A provider reading through ``held``, Alice's note stored."""
    p = BuiltinProvider(pooled, held_reads=held)
    await p.add(ALICE, USER_CUBE, notes("Alice goes hiking in the Alps"))
    return p


async def open_connections(pooled: AsyncEngine) -> set[int]:
    """The ids of the server's connections."""
    async with pooled.connect() as conn:
        return {int(r.id) for r in await conn.execute(text(
            "SELECT ID AS id FROM information_schema.PROCESSLIST"))}


async def connection_id(held: HeldReads) -> int:
    rows = await held.rows(text("SELECT CONNECTION_ID() AS id"), {})
    assert rows is not None
    return int(rows[0].id)


async def in_flight(held: HeldReads, sql: str | Select[Any],
                    ) -> asyncio.Task[list[DbRow] | None]:
    """A read of ``sql`` on the held connection, under way (the connection busy)."""
    task = asyncio.ensure_future(held.rows(text(sql) if isinstance(sql, str) else sql, {}))
    await asyncio.sleep(0.1)
    return task


async def test_a_search_of_held_scopes_takes_no_pooled_connection_and_sees_every_write(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    pooled, own = engines
    held = HeldReads(own)
    p = BuiltinProvider(pooled, held_reads=held)
    plain = BuiltinProvider(pooled)
    try:
        await p.add(ALICE, USER_CUBE, notes("Alice goes hiking in the Alps", "Alice likes tea"))
        first = await p.search(ALICE, QUESTION)  # loads the scope
        checkouts: list[object] = []

        def checkout(*args: object) -> None:
            checkouts.append(args)

        event.listen(pooled.sync_engine.pool, "checkout", checkout)
        try:
            again = await p.search(ALICE, QUESTION)
        finally:
            event.remove(pooled.sync_engine.pool, "checkout", checkout)
        assert checkouts == []  # versions on the held connection, rows held
        assert [m.id for m in again] == [m.id for m in first]
        assert [m.id for m in again] == [m.id for m in await plain.search(ALICE, QUESTION)]
        # another worker writes: the held connection reads the version it committed (no
        # snapshot kept from an earlier read), and the search brings the scope forward
        other = BuiltinProvider(pooled)
        await other.add(ALICE, USER_CUBE, notes("Alice went hiking in Patagonia"))
        found = [m.content for m in await p.search(ALICE, QUESTION)]
        assert "Alice went hiking in Patagonia" in found
        await other.add(ALICE, USER_CUBE, notes("Alice plans hiking in Norway"))
        got = await p.search(ALICE, QUESTION)
        assert "Alice plans hiking in Norway" in [m.content for m in got]
    finally:
        await p.close()  # (an open snapshot would hold the database's drop)


async def test_a_search_reads_the_versions_on_the_driver_s_connection(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    """Once the connection is open, a search of held scopes executes nothing through
    SQLAlchemy on it (the versions are read by :mod:`streams.adapters.db.driver_read`)
    and still finds a write committed elsewhere."""
    pooled, own = engines
    held = HeldReads(own)
    p = await hiker(pooled, held)
    through: list[str] = []
    event.listen(own.sync_engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: through.append(statement))
    try:
        assert await p.search(ALICE, QUESTION)  # opens the connection, loads the scope
        through.clear()
        await BuiltinProvider(pooled).add(ALICE, USER_CUBE, notes("Alice hiking in Norway"))
        got = await p.search(ALICE, QUESTION)
        assert "Alice hiking in Norway" in [m.content for m in got]
        assert await p.search(ALICE, QUESTION)
        assert through == []
    finally:
        await p.close()


async def test_a_held_connection_the_server_killed_sends_the_search_to_the_pool_once(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    pooled, own = engines
    held = HeldReads(own, pause_s=0.0)
    p = await hiker(pooled, held)
    assert await p.search(ALICE, QUESTION)
    killed = await connection_id(held)
    async with pooled.connect() as conn:
        await conn.execute(text(f"KILL {killed}"))
    await asyncio.sleep(0.1)
    assert [m.content for m in await p.search(ALICE, QUESTION)] == [
        "Alice goes hiking in the Alps"]
    assert await connection_id(held) != killed
    await p.close()


@pytest.mark.parametrize("through", ["sqlalchemy", "driver"])
async def test_a_read_cancelled_halfway_leaves_no_half_read_connection_behind(
    engines: tuple[AsyncEngine, AsyncEngine], through: str,
) -> None:
    """Through SQLAlchemy (a text statement) or on the driver (a SELECT of columns)."""
    _, own = engines
    held = HeldReads(own)
    before = await connection_id(held)
    slow = await in_flight(held, "SELECT SLEEP(0.5) AS s, 7 AS seven" if through == "sqlalchemy"
                           else select(func.sleep(0.5).label("s"), literal(7).label("n")))
    assert await held.rows(text("SELECT 1 AS one"), {}) is None  # busy: read elsewhere
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    rows = await held.rows(select(literal(2).label("two")), {})
    assert rows is not None and [tuple(r) for r in rows] == [(2,)]  # not the slow read's
    assert await connection_id(held) != before
    await held.close()


async def test_a_search_finding_the_held_connection_busy_reads_on_the_pool(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    pooled, own = engines
    held = HeldReads(own)
    p = await hiker(pooled, held)
    await p.search(ALICE, QUESTION)
    slow = await in_flight(held, "SELECT SLEEP(4) AS s")
    got = await asyncio.wait_for(p.search(ALICE, QUESTION), 2.0)  # no wait for the held one
    assert [m.content for m in got] == ["Alice goes hiking in the Alps"]
    await slow
    await p.close()


async def test_closing_closes_the_held_connection(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    pooled, own = engines
    held = HeldReads(own)
    mine = await connection_id(held)
    await held.close()
    assert await held.rows(text("SELECT 1 AS one"), {}) is None
    assert mine not in await open_connections(pooled)


async def test_closing_during_a_read_waits_for_it_and_closes_the_connection(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    """Shutdown while a search reads: the read gets its rows, and the connection is
    closed by the time ``close`` is back (before its engine is disposed); a read that
    outlives the wait fails and its connection is closed all the same."""
    pooled, own = engines
    held = HeldReads(own)
    mine = await connection_id(held)
    reading = await in_flight(held, "SELECT SLEEP(0.3) AS s, 1 AS one")
    await held.close()
    assert reading.done()
    rows = reading.result()
    assert rows is not None and rows[0].one == 1
    assert mine not in await open_connections(pooled)
    held = HeldReads(own)
    mine = await connection_id(held)
    reading = await in_flight(held, "SELECT SLEEP(4) AS s")
    await held.close(wait_s=0.2)
    assert await asyncio.wait_for(reading, 2.5) is None  # failed under the close
    for _ in range(100):  # the server lets go once its statement ends
        if mine not in await open_connections(pooled):
            break
        await asyncio.sleep(0.1)
    assert mine not in await open_connections(pooled)


async def test_a_worker_s_runtime_keeps_the_connection_outside_its_pool_and_closes_it(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    pooled, _ = engines
    url = pooled.url.render_as_string(hide_password=False)
    settings = Settings(database=DatabaseSettings(url=SecretStr(url), pool_size=1))
    rt = await Runtime(settings, migrate=False).start()
    try:
        p = rt.providers.get("mysql").provider
        assert isinstance(p, BuiltinProvider) and p.held_reads is not None
        await p.add(ALICE, USER_CUBE, notes("Alice goes hiking in the Alps"))
        assert await p.search(ALICE, QUESTION)
        mine = await connection_id(p.held_reads)
        assert await p.search(ALICE, QUESTION)
        assert rt.engine.sync_engine.pool.checkedout() == 0  # kept outside the pool
    finally:
        await rt.stop()
    assert mine not in await open_connections(pooled)


async def test_a_connection_that_cannot_be_opened_never_fails_a_search(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    """The server refuses new connections (here: nothing listens): the search reads on
    the pool, and the next ones do too without trying again until the pause is over."""
    pooled, _ = engines
    nowhere = create_async_engine("mysql+aiomysql://u:p@127.0.0.1:1/none", poolclass=NullPool)
    now = [100.0]
    held = HeldReads(nowhere, pause_s=5.0, clock=lambda: now[0])
    tries: list[object] = []
    event.listen(nowhere.sync_engine, "do_connect", lambda *a: tries.append(a))
    p = await hiker(pooled, held)
    try:
        for _ in range(3):
            assert [m.content for m in await p.search(ALICE, QUESTION)] == [
                "Alice goes hiking in the Alps"]
        assert len(tries) == 1  # then paused
        now[0] += 5.0
        assert await p.search(ALICE, QUESTION)
        assert len(tries) == 2
    finally:
        await p.close()
        await nowhere.dispose()


async def test_the_held_connection_is_opened_anew_after_the_recycle_time(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    _, own = engines
    now = [0.0]
    held = HeldReads(own, recycle_s=60.0, clock=lambda: now[0])
    first = await connection_id(held)
    now[0] += 59.0
    assert await connection_id(held) == first
    now[0] += 1.0
    assert await connection_id(held) != first
    await held.close()
