"""The held connection's close against a read still connecting (no database needed:
the engine is a stand-in whose connect waits until told)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from sqlalchemy import text

from streams.memory.providers.builtin.held_reads import HeldReads


class Conn:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def execute(self, statement: Any, params: Any) -> Any:
        self.log.append("execute")
        raise AssertionError("no read after close")

    async def invalidate(self) -> None:
        self.log.append("invalidate")

    async def close(self) -> None:
        self.log.append("close")


class SlowEngine:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.gate = asyncio.Event()

    def execution_options(self, **options: Any) -> SlowEngine:
        return self

    async def connect(self) -> Conn:
        await self.gate.wait()
        self.log.append("connected")
        return Conn(self.log)


async def test_a_read_still_connecting_at_close_reads_nothing_and_closes_its_connection(
) -> None:
    engine = SlowEngine()
    held = HeldReads(cast(Any, engine))
    reading = asyncio.ensure_future(held.rows(text("SELECT 1"), {}))
    await asyncio.sleep(0.01)
    await held.close(wait_s=0.05)  # the read outlives the wait, still connecting
    engine.gate.set()
    assert await asyncio.wait_for(reading, 1.0) is None
    for _ in range(100):
        if "close" in engine.log:
            break
        await asyncio.sleep(0.01)
    assert engine.log == ["connected", "invalidate", "close"]
