"""A query part out of time is cancelled and left to unwind: the reply does not wait for
its cleanup (a rollback, a connection closed on a loaded database). A request cancelled
as a whole waits for its parts' unwinding."""

from __future__ import annotations

import asyncio
from typing import Any

from streams.query.engine import QueryConfig, QueryEngine
from streams.session.reader import SessionWindow
from streams.wire.query import MemoryQuery

QUERY = MemoryQuery.model_validate({"tenant_id": "t1", "user_id": "u1", "agent_id": "a1",
                                    "conversation_id": "c1", "message": "hi"})
GUARD_S = 10.0  # a deadlock guard, not a measure: each step below takes milliseconds


class SlowToUnwind:
    """A Session window read that never ends and, cancelled, unwinds only when
    ``let_go`` is set."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.let_go = asyncio.Event()
        self.unwound = False

    async def window(self, *args: Any, **kwargs: Any) -> SessionWindow:
        self.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await self.let_go.wait()
            self.unwound = True
            raise
        raise AssertionError("unreachable")


def engine(reader: SlowToUnwind) -> QueryEngine:
    return QueryEngine(QueryConfig(default_long_memory=False), reader,  # type: ignore[arg-type]
                       type("NoConfigs", (), {"get": lambda *a: None})(),
                       None, lambda text: len(text.split()))  # type: ignore[arg-type]


async def test_a_part_out_of_time_is_left_to_unwind_and_the_reply_goes() -> None:
    reader = SlowToUnwind()
    e = engine(reader)
    reply = await asyncio.wait_for(e.answer(QUERY, budget_s=0.05), GUARD_S)
    assert [(w.code, w.message) for w in reply.warnings] == [("short_term_failed", "timed out")]
    assert reply.short_term is None and not reader.unwound
    assert len(e._unwinding) == 1  # kept until it has unwound
    reader.let_go.set()
    for _ in range(100):
        if not e._unwinding:
            break
        await asyncio.sleep(0)
    assert reader.unwound and not e._unwinding


async def test_a_request_cancelled_waits_for_its_parts_to_unwind() -> None:
    reader = SlowToUnwind()
    e = engine(reader)
    answering = asyncio.ensure_future(e.answer(QUERY, budget_s=GUARD_S))
    await asyncio.wait_for(reader.started.wait(), GUARD_S)
    answering.cancel()
    await asyncio.sleep(0.01)
    assert not answering.done()  # its part is unwinding
    reader.let_go.set()
    await asyncio.wait({answering}, timeout=GUARD_S)
    assert answering.cancelled() and reader.unwound and not e._unwinding
