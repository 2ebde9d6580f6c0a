"""The cube lock of the embedded mode (one worker, SQLite): in-process, bounded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.cube_lock import NamedCubeLocks
from streams.memory.cube_locks import HeldCube
from streams.memory.model import USER_CUBE, CubeKey
from streams.wire.envelope import SourceRecord
from streams.wire.headers import ATTEMPT, header
from tests.agents.consolidation_harness import Harness
from tests.agents.fakes import FakeMemoryProvider
from tests.support.worker import eventually

BERLIN = "I live in Berlin."


def hold_fact_writes(provider: FakeMemoryProvider) -> tuple[asyncio.Event, asyncio.Event]:
    """The provider's first write of facts waits for ``opened``; ``entered`` once it does."""
    entered, opened = asyncio.Event(), asyncio.Event()
    add = provider.add

    async def gated(scope: Any, cube: str, memories: Any) -> Any:
        if cube == USER_CUBE and any(m.kind == "fact" for m in memories) \
                and not entered.is_set():
            entered.set()
            await opened.wait()
        return await add(scope, cube, memories)

    provider.add = gated  # type: ignore[method-assign]
    return entered, opened


class CountedLocks(NamedCubeLocks):
    """Cube locks that count the runs asking for one and the runs holding one."""

    def __init__(self) -> None:
        super().__init__(timeout_s=10.0)
        self.asking = 0
        self.holding = 0

    @asynccontextmanager
    async def hold(self, key: CubeKey) -> AsyncIterator[HeldCube]:
        self.asking += 1
        async with super().hold(key) as held:
            self.holding += 1
            yield held


async def test_two_sessions_of_one_user_in_one_worker_store_the_fact_once(
    engine: AsyncEngine,
) -> None:
    h = Harness(engine)
    h.pipeline.writer.locks = locks = CountedLocks()
    entered, opened = hold_fact_writes(h.provider)
    await h.say("c1", [("user", BERLIN)])
    await h.say("c2", [("user", BERLIN)])
    first = asyncio.ensure_future(h.pipeline.run(h.closed("c1")))
    await asyncio.wait_for(entered.wait(), 10)
    second = asyncio.ensure_future(h.pipeline.run(h.closed("c2")))
    await eventually(lambda: second.done() or (locks.asking, locks.holding) == (2, 1), 10,
                     "the second run at the cube's lock", 0.01)
    assert h.provider.contents("fact") == []
    opened.set()
    await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert h.provider.valid("fact") == [BERLIN]
    (row,) = [r for r in await h.runs.candidates("t1/c2#1") if r.candidate.kind == "fact"]
    assert (row.action, row.decider) == ("skip", "rules")


async def test_a_lock_wait_that_times_out_goes_to_the_retry_topic_then_completes_once(
    engine: AsyncEngine,
) -> None:
    h = Harness(engine)
    h.pipeline.writer.locks = NamedCubeLocks(timeout_s=0.05)
    entered, opened = hold_fact_writes(h.provider)
    await h.say("c1", [("user", BERLIN)])
    await h.say("c2", [("user", BERLIN)])
    first = asyncio.ensure_future(h.pipeline.run(h.closed("c1")))
    await asyncio.wait_for(entered.wait(), 10)
    handled = await asyncio.wait_for(h.processor.handle(h.record(h.closed("c2"))), 10)
    # the run waits no longer than the lock's timeout: its event is requeued, its
    # attempt not counted, and nothing was written without the lock
    assert handled.outcome == "requeued"
    (out,) = h.publisher.on("retry")
    assert header(out.headers, ATTEMPT) == b"1"
    assert header(out.headers, "memstream.retry.reason") == b"cube_lock_timeout"
    assert h.provider.contents("fact") == [] and h.publisher.on("dlq") == []
    opened.set()
    await asyncio.wait_for(first, 10)
    again = await asyncio.wait_for(h.processor.handle(
        SourceRecord("retry", 0, 0, out.key, out.value, out.headers)), 10)
    assert again.outcome == "done"
    assert h.provider.valid("fact") == [BERLIN] and len(h.provider.contents("fact")) == 1
    assert len(h.publisher.on("retry")) == 1
