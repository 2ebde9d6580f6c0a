"""A group chat's consolidation closed by one speaker (bob) racing with the
erasure of the other (alice), on SQLite with the built-in provider and the real
pipeline and executor, each interleaving forced by gates: nothing of alice is
left in any cube or table, and bob's memories are written. The writer's own
check, under each cube's lock, is shown with the rows of both."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.messages import MessageStore, message_row
from streams.clock import naive_utc
from streams.consolidation.model import PlannedCandidate
from streams.erasure.model import ErasureMark
from streams.erasure.rules.coverage import ErasureIndex
from streams.memory.cube_locks import HeldCube
from streams.memory.model import CubeKey
from streams.wire.records import ChatMessage, SessionClosed
from tests.agents.consolidation_harness import Harness
from tests.agents.test_erasure_sqlite import T0, Setup, request

SAID = [("alice", "user", "I live in Oslo."), ("alice", "assistant", "Oslo is cold."),
        ("bob", "user", "I live in Lisbon."), ("bob", "assistant", "Lisbon is warm.")]


class Gate:
    """Where the run waits: ``reached`` once it got there, until ``opened``."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()

    async def hold(self) -> None:
        if not self.opened.is_set():
            self.reached.set()
            await self.opened.wait()


class GatedRuns:
    """The run store, held before the candidates are stored."""

    def __init__(self, inner: Any, gate: Gate) -> None:
        self.inner, self.gate = inner, gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def save_judgement(self, closed_id: str, judge: str,
                             planned: Sequence[PlannedCandidate], now: Any) -> bool:
        await self.gate.hold()
        saved: bool = await self.inner.save_judgement(closed_id, judge, planned, now)
        return saved


async def group_chat(s: Setup) -> None:
    rows = []
    for i, (user, role, line) in enumerate(SAID):
        msg = ChatMessage(event_id=f"g1-{i}", type="message", tenant_id="t1", user_id=user,
                          agent_id="a1", conversation_id="g1", role=role, content=line,
                          created_at=T0 + timedelta(minutes=i))
        rows.append(message_row(msg, T0, session_seq=1))
    await MessageStore(s.engine).store(rows)


def closed_by_bob() -> SessionClosed:
    at = T0 + timedelta(minutes=5)
    return SessionClosed(closed_id="t1/g1#1", tenant_id="t1", user_id="bob", agent_id="a1",
                         conversation_id="g1", trigger="explicit", session_seq=1,
                         closed_at=at, last_activity=at, message_count=4)


async def left_of(engine: AsyncEngine, word: str) -> dict[str, int]:
    """Rows holding ``word`` in any table with text, by table."""
    out = {}
    async with engine.connect() as conn:
        for table, column in (("memory", "content"), ("consolidation_candidate", "content"),
                              ("conversation_message", "content")):
            n = (await conn.execute(text(
                f"SELECT COUNT(*) FROM {table} WHERE {column} LIKE :w"), {"w": f"%{word}%"}
            )).scalar_one()
            if n:
                out[table] = int(n)
        n = (await conn.execute(text(
            "SELECT COUNT(*) FROM memory WHERE user_id = 'alice'"))).scalar_one()
        if n:
            out["memory of alice"] = int(n)
    return out


class GatedDeletes:
    """The erasure's table deletes, held at its second pass's candidates: its second
    delete of the provider's copies is done, the tables not yet."""

    def __init__(self, inner: Any, gate: Gate) -> None:
        self.inner, self.gate = inner, gate
        self.candidates = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def delete(self, step: Any, *args: Any, **kwargs: Any) -> int:
        if step.name == "consolidation_candidate":
            self.candidates += 1
            if self.candidates == 2:
                await self.gate.hold()
        n: int = await self.inner.delete(step, *args, **kwargs)
        return n


@pytest.mark.parametrize("erasure_held", [False, True])
async def test_a_group_chat_run_closed_by_bob_leaves_nothing_of_erased_alice(
        engine: AsyncEngine, erasure_held: bool) -> None:
    """The run judged alice's and bob's messages, then waits to store the candidates;
    meanwhile the erasure of alice is done (or held between its two deletes of the
    copies and its second delete of the tables, while the run stores and writes)."""
    s = Setup(engine)
    judged, between = Gate(), Gate()
    s.pipeline.runs = GatedRuns(s.pipeline.runs, judged)  # type: ignore[assignment]
    s.executor.tables = GatedDeletes(s.executor.tables, between)  # type: ignore[assignment]
    if not erasure_held:
        between.opened.set()
    await group_chat(s)
    run = asyncio.ensure_future(s.pipeline.run(closed_by_bob()))
    await asyncio.wait_for(judged.reached.wait(), 10)
    erasure = asyncio.ensure_future(s.executor.erase(request(target="user", user_id="alice")))
    if erasure_held:
        await asyncio.wait_for(between.reached.wait(), 10)
    else:
        assert (await asyncio.wait_for(erasure, 10)).status == "done"
    judged.opened.set()
    out = await asyncio.wait_for(run, 10)
    between.opened.set()
    receipt = await asyncio.wait_for(erasure, 10)
    assert out.outcome == "done" and receipt.status == "done"
    assert await left_of(engine, "Oslo") == {}
    found = await s.search("bob", "where do I live")
    assert "I live in Lisbon." in found and "User: I live in Lisbon." in found


class ErasingLocks:
    """Cube locks that take the erasure of ``mark`` in just before the first lock is
    held: the erasure is recorded after the run stored its candidates."""

    def __init__(self, inner: Any, index: ErasureIndex, mark: ErasureMark) -> None:
        self.inner, self.index, self.mark = inner, index, mark

    @asynccontextmanager
    async def hold(self, key: CubeKey) -> AsyncIterator[HeldCube]:
        self.index.add(self.mark)
        async with self.inner.hold(key) as held:
            yield held


async def test_the_writer_drops_inside_each_cube_lock_the_rows_of_an_erased_speaker(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    for user, role, line in SAID:
        await h.say("g1", [(role, line)], user=user, seq=1)
    index = h.pipeline.erasures
    h.pipeline.writer.locks = ErasingLocks(h.pipeline.writer.locks, index, ErasureMark(
        "e-1", "t1", "user", "alice", cutoff=naive_utc(T0 + timedelta(hours=2))))
    out = await h.pipeline.run(h.closed("g1", user="bob"))
    assert out.outcome == "done"
    assert not [c for c in h.provider.contents() if "Oslo" in c]
    assert sorted(h.provider.valid()) == [
        "Assistant: Lisbon is warm.", "I live in Lisbon.", "User: I live in Lisbon."]
    rows = await h.runs.candidates("t1/g1#1")
    assert rows and {r.user_id for r in rows} == {"bob"}  # alice's dropped from the run
