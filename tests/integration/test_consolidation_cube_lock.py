"""One fact stored once when two consolidations of one cube overlap, on MariaDB.

Each "worker" is a runtime of its own (engine, connection pool, built-in
provider and its caches) with the consolidation the worker builds. The overlap
is made, not hoped for: the first run is held inside the cube's critical
section (its provider write, or its conflict search, waits for a gate) until
the second is seen waiting for the cube's lock in the server's process list,
or has finished (which it does when nothing makes it wait).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.cube_lock import lock_name
from streams.adapters.db.messages import message_row
from streams.consolidation.pipeline import Outcome
from streams.memory.agent_configs import StaticAgentConfigs
from streams.memory.model import USER_CUBE, agent_cube, cube_key
from streams.memory.provider import ProviderUnavailable, Scope, SearchRequest
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.settings import DatabaseSettings, IngestSettings, Settings
from streams.wire.envelope import SourceRecord
from streams.wire.records import ChatMessage, SessionClosed
from streams.worker.runtime import Runtime
from streams.worker.wiring import Consolidation, Wiring
from tests.agents.fakes import FakePublisher
from tests.integration.conftest import Stack
from tests.integration.consolidation_support import contents
from tests.support.worker import eventually

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
BERLIN = "I live in Berlin."
LESSON = "Lesson learned: always confirm the booking date before paying."
AGENT_CUBE = agent_cube("a1")


@dataclass
class Worker:
    runtime: Runtime
    consolidation: Consolidation

    @property
    def provider(self) -> BuiltinProvider:
        provider = self.runtime.providers.get("mysql").provider
        assert isinstance(provider, BuiltinProvider)
        return provider

    async def run(self, closed: SessionClosed) -> Outcome:
        return await self.consolidation.pipeline.run(closed)


@asynccontextmanager
async def two_workers(stack: Stack) -> AsyncIterator[tuple[Worker, Worker]]:
    settings = Settings(database=DatabaseSettings(url=SecretStr(stack.db_url)),
                        ingest=IngestSettings(retry_initial_s=0.05, retry_max_s=0.2))
    started: list[Worker] = []
    try:
        for _ in range(2):
            runtime = await Runtime(settings, migrate=True).start()
            started.append(Worker(runtime, Wiring(
                settings, runtime, publisher=FakePublisher(),
                agent_configs=StaticAgentConfigs({})).consolidation()))
        yield started[0], started[1]
    finally:
        for w in started:
            await w.runtime.stop()


@asynccontextmanager
async def observer(stack: Stack) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(stack.db_url)
    try:
        yield engine
    finally:
        await engine.dispose()


async def lock_waiters(engine: AsyncEngine, database: str) -> int:
    """Connections of ``database`` waiting in GET_LOCK."""
    async with engine.connect() as conn:
        return int((await conn.execute(text(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
            "WHERE DB = :db AND STATE = 'User lock'"), {"db": database})).scalar_one())


_n = 0


async def session(w: Worker, conv: str, user: str, lines: list[tuple[str, str]]) -> SessionClosed:
    """Store a session's messages; its closing event."""
    global _n
    rows = []
    for role, content in lines:
        _n += 1
        msg = ChatMessage(event_id=f"{conv}-{_n}", type="message", tenant_id="t1",
                          user_id=user, agent_id="a1", conversation_id=conv,
                          role=role, content=content,  # type: ignore[arg-type]
                          created_at=T0 + timedelta(minutes=_n))
        rows.append(message_row(msg, datetime.now(UTC)))
    await w.runtime.store.store(rows)
    now = datetime.now(UTC)
    return SessionClosed(closed_id=f"t1/{conv}#1", tenant_id="t1", user_id=user, agent_id="a1",
                         conversation_id=conv, trigger="explicit", session_seq=1, closed_at=now,
                         last_activity=now, message_count=len(rows),
                         last_event_id=rows[-1]["event_id"])


class Gate:
    """Holds the calls it is put on until opened; ``entered`` is set once one waits."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()

    async def wait(self) -> None:
        self.entered.set()
        await self.opened.wait()


def before_fact_writes(provider: BuiltinProvider, cube: str,
                       then: Callable[[], Awaitable[None]]) -> None:
    """``then`` runs before each write of facts to ``cube``."""
    add = provider.add

    async def gated(scope: Scope, to: str, memories: Any, **kw: Any) -> Any:
        if to == cube and any(m.kind == "fact" for m in memories):
            await then()
        return await add(scope, to, memories, **kw)

    provider.add = gated  # type: ignore[method-assign]


def after_searches(provider: BuiltinProvider, cube: str, gate: Gate) -> None:
    """Searches of ``cube`` return only once ``gate`` opens (with what they found before)."""
    search = provider.search

    async def gated(scope: Scope, request: SearchRequest) -> Any:
        found = await search(scope, request)
        if cube in request.cubes:
            await gate.wait()
        return found

    provider.search = gated  # type: ignore[method-assign]


def fact_rows(stack: Stack, closed_id: str) -> list[list[str]]:
    return stack.sql("SELECT action, decider, COALESCE(memory_id, ''), reason "
                     f"FROM consolidation_candidate WHERE closed_id = '{closed_id}' "
                     "AND kind = 'fact' ORDER BY seq")


def memory_id(stack: Stack, content: str) -> str:
    (row,) = stack.sql(f"SELECT id FROM memory WHERE kind = 'fact' AND content = '{content}'")
    return row[0]


async def overlap(stack: Stack, first: Worker, gate: Gate, first_run: Awaitable[Any],
                  second_run: Awaitable[Outcome]) -> tuple[Any, Outcome]:
    """Run ``first_run`` until it waits at ``gate`` inside the cube's critical section,
    then ``second_run`` until it waits for the cube's lock (or is done); then open."""
    async with observer(stack) as obs:
        one = asyncio.ensure_future(first_run)
        await asyncio.wait_for(gate.entered.wait(), 60)
        two = asyncio.ensure_future(second_run)

        async def second_waits_or_is_done() -> bool:
            return two.done() or await lock_waiters(obs, stack.database) > 0

        await eventually(second_waits_or_is_done, 60, "the second run at the cube's lock")
        gate.opened.set()
        return await asyncio.wait_for(one, 60), await asyncio.wait_for(two, 60)


async def test_two_sessions_of_one_user_on_two_workers_store_the_fact_once(
    stack: Stack,
) -> None:
    async with two_workers(stack) as (a, b):
        # an earlier memory both workers have searched: their caches hold the cube
        await b.run(await session(b, "c0", "u1", [("user", "I love hiking.")]))
        for w in (a, b):
            await w.provider.search(Scope("t1", "u1", "a1"), SearchRequest("hiking", [USER_CUBE]))
        gate = Gate()
        before_fact_writes(a.provider, USER_CUBE, gate.wait)
        first, second = await overlap(
            stack, a, gate, a.run(await session(a, "c1", "u1", [("user", BERLIN)])),
            b.run(await session(b, "c2", "u1", [("user", BERLIN)])))

    assert (first.outcome, second.outcome) == ("done", "done")
    assert contents(stack) == [BERLIN, "I love hiking."]
    written = memory_id(stack, BERLIN)
    assert fact_rows(stack, "t1/c1#1") == [["store", "rules", written,
                                            "no stored memory says the same or the opposite"]]
    assert fact_rows(stack, "t1/c2#1") == [["skip", "rules", "", f"duplicate of {written}"]]


async def test_two_users_of_one_agent_store_the_agent_fact_once(stack: Stack) -> None:
    def lesson(user: str, conv: str, w: Worker) -> Awaitable[SessionClosed]:
        return session(w, conv, user, [("user", "Can you book the hotel for May?"),
                                       ("assistant", LESSON)])

    async with two_workers(stack) as (a, b):
        await b.run(await session(b, "c0", "u3", [
            ("assistant", "Lesson learned: ask whether breakfast is included.")]))
        for w, user in ((a, "u1"), (b, "u2")):
            await w.provider.search(Scope("t1", user, "a1"),
                                    SearchRequest("breakfast", [AGENT_CUBE]))
        gate = Gate()
        before_fact_writes(a.provider, AGENT_CUBE, gate.wait)
        first, second = await overlap(stack, a, gate, a.run(await lesson("u1", "c1", a)),
                                      b.run(await lesson("u2", "c2", b)))

    assert (first.outcome, second.outcome) == ("done", "done")
    rows = stack.sql("SELECT content FROM memory WHERE kind = 'fact' AND cube = 'agent_a1' "
                     "AND valid_to IS NULL ORDER BY content")
    assert rows == [["always confirm the booking date before paying."],
                    ["ask whether breakfast is included."]]
    written = memory_id(stack, "always confirm the booking date before paying.")
    assert fact_rows(stack, "t1/c2#1") == [["skip", "rules", "", f"duplicate of {written}"]]
    # each user's episodes went to the user's own profile
    assert stack.sql("SELECT user_id, COUNT(*) FROM memory WHERE kind = 'episode' "
                     "GROUP BY user_id ORDER BY user_id") == [["u1", "2"], ["u2", "2"],
                                                              ["u3", "1"]]


async def test_a_resumed_run_skips_the_fact_another_run_stored_meanwhile(stack: Stack) -> None:
    async with two_workers(stack) as (a, b):
        async def provider_down() -> None:
            raise ProviderUnavailable("down", provider="mysql", operation="add")

        before_fact_writes(a.provider, USER_CUBE, provider_down)
        resumed = await session(a, "c1", "u1", [("user", BERLIN)])
        with pytest.raises(ProviderUnavailable):
            await a.run(resumed)
        assert fact_rows(stack, "t1/c1#1") == [
            ["store", "rules", "", "no stored memory says the same or the opposite"]]

        await b.run(await session(b, "c2", "u1", [("user", BERLIN)]))
        written = memory_id(stack, BERLIN)
        del a.provider.add  # the provider is back
        out = await a.run(resumed)

    assert out.outcome == "done" and out.stats is not None and out.stats.skipped == 1
    assert contents(stack) == [BERLIN]
    assert fact_rows(stack, "t1/c1#1") == [["skip", "recheck", "",
                                            f"stored meanwhile as {written}"]]
    assert len(contents(stack, "episode")) == 2  # the resumed run's episode is written


async def test_a_lock_holder_whose_connection_dies_frees_the_cube_and_resumes(
    stack: Stack,
) -> None:
    async with two_workers(stack) as (a, b), observer(stack) as obs:
        gate = Gate()
        after_searches(a.provider, USER_CUBE, gate)  # a decides on a search that found nothing
        closed = await session(a, "c1", "u1", [("user", BERLIN)])
        record = SourceRecord("closed", 0, 0, b"c1", closed.model_dump_json().encode(), [])
        first = asyncio.ensure_future(a.consolidation.processor.handle(record))
        await asyncio.wait_for(gate.entered.wait(), 60)
        second = asyncio.ensure_future(b.run(await session(b, "c2", "u1", [("user", BERLIN)])))
        await eventually(lambda: lock_waiters(obs, stack.database), 60, "b at the cube's lock")

        name = lock_name(stack.database, cube_key("t1", USER_CUBE, "u1"))
        async with obs.connect() as conn:
            holder = (await conn.execute(text("SELECT IS_USED_LOCK(:n)"), {"n": name})).scalar()
            assert holder is not None
            await conn.execute(text(f"KILL {int(holder)}"))
        # the server released the dead connection's lock: b proceeds while a is held
        out = await asyncio.wait_for(second, 60)
        assert out.outcome == "done"
        assert not first.done()
        written = memory_id(stack, BERLIN)

        gate.opened.set()  # a finds its lock gone before writing, waits, resumes
        handled = await asyncio.wait_for(first, 60)

    assert handled.outcome == "done"
    assert contents(stack) == [BERLIN]
    assert fact_rows(stack, "t1/c1#1") == [["skip", "recheck", "",
                                            f"stored meanwhile as {written}"]]
    assert fact_rows(stack, "t1/c2#1")[0][:3] == ["store", "rules", written]


PARIS = "I live in Paris."
BOLT = "Actually, my dog is Bolt now."
BOLT_FACT = "my dog is Bolt now."  # as the rule judge keeps it


@pytest.mark.parametrize("resumed_is_newer", [False, True])
async def test_a_resumed_run_decides_again_on_what_another_run_stored_meanwhile(
    stack: Stack, resumed_is_newer: bool,
) -> None:
    """A decision made before another run stored a contradicting fact is not written
    as made: the resumed run decides again and ends where the two runs one after
    the other would (the newer fact valid, the older one not)."""
    async with two_workers(stack) as (a, b):
        async def provider_down() -> None:
            raise ProviderUnavailable("down", provider="mysql", operation="add")

        if resumed_is_newer:  # the other run's session is the older one
            other = await session(b, "c2", "u1", [("user", PARIS)])
            resumed = await session(a, "c1", "u1", [("user", BERLIN)])
        else:
            resumed = await session(a, "c1", "u1", [("user", BERLIN)])
            other = await session(b, "c2", "u1", [("user", PARIS)])
        before_fact_writes(a.provider, USER_CUBE, provider_down)
        with pytest.raises(ProviderUnavailable):
            await a.run(resumed)
        assert [r[0] for r in fact_rows(stack, "t1/c1#1")] == ["store"]  # decided, not written

        await b.run(other)
        paris = memory_id(stack, PARIS)
        del a.provider.add  # the provider is back
        out = await a.run(resumed)

    assert out.outcome == "done"
    if resumed_is_newer:
        assert contents(stack) == [BERLIN]
        action, _, written, _ = fact_rows(stack, "t1/c1#1")[0]
        assert (action, written) == ("supersede", memory_id(stack, BERLIN))
    else:
        assert contents(stack) == [PARIS]
        assert fact_rows(stack, "t1/c1#1")[0][:3] == ["skip", "rules", ""]
    assert paris


async def test_a_resumed_run_that_had_written_without_recording_still_supersedes(
    stack: Stack,
) -> None:
    """The built-in provider's add is idempotent, so nothing is recorded before it:
    an attempt that wrote the new fact and stopped before recording its id leaves a
    decision to be made again, on a cube that holds the fact already. That copy is
    the run's own, not another memory saying the same: the fact still supersedes."""
    async with two_workers(stack) as (a, _):
        await a.run(await session(a, "c1", "u1", [("user", "My dog is Pepper.")]))
        newer = await session(a, "c2", "u1", [("user", BOLT)])
        runs = a.consolidation.pipeline.writer.runs
        mark_written = runs.mark_written

        async def connection_lost(*args: Any, **kwargs: Any) -> int:
            raise ConnectionError("lost connection to the database during the query")

        runs.mark_written = connection_lost  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            await a.run(newer)
        assert contents(stack) == ["My dog is Pepper.", BOLT_FACT]  # written, not recorded
        runs.mark_written = mark_written  # type: ignore[method-assign]
        out = await a.run(newer)

    assert out.outcome == "done"
    assert contents(stack) == [BOLT_FACT]
    action, _, written, _ = fact_rows(stack, "t1/c2#1")[0]
    assert (action, written) == ("supersede", memory_id(stack, BOLT_FACT))
