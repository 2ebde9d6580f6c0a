"""Erasure where it meets the rest (SQLite, the real pipeline and the built-in
provider): a group chat, a summary made while its messages are erased, a memory
no consolidation recorded, erasure ids of two tenants, a re-driven event first
read before the erasure, and a request the processor cannot carry out (an outage
waited out, a fault answered and dead-lettered, never a stopped agent)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.messages import MessageStore, message_row
from streams.adapters.db.summaries import SummaryRows
from streams.consolidation.summarizer import Summarizer
from streams.memory.model import USER_CUBE, MemoryCandidate
from streams.memory.provider import ChatResult, Scope
from streams.stores import StoreUnavailable
from streams.tokens import TokenCounter
from streams.wire.envelope import DeadLettered, SourceRecord, ToSend
from streams.wire.erasure import ErasureReceipt
from streams.wire.records import ChatMessage, SessionClosed
from streams.wire.spring_reply import request_headers
from tests.agents.fakes import FakeCache, FakeChatModel
from tests.agents.test_erasure_sqlite import T0, Setup, request


async def said(s: Setup, conv: str, lines: list[tuple[str, str]], start: int = 0) -> None:
    rows = []
    for i, (user, line) in enumerate(lines):
        msg = ChatMessage(event_id=f"{conv}-{start + i}", type="message", tenant_id="t1",
                          user_id=user, agent_id="a1", conversation_id=conv, role="user",
                          content=line, created_at=T0 + timedelta(minutes=start + i))
        rows.append(message_row(msg, T0, session_seq=1))
    await MessageStore(s.engine).store(rows)


def closed(conv: str, user: str) -> SessionClosed:
    at = T0 + timedelta(minutes=30)
    return SessionClosed(closed_id=f"t1/{conv}#1", tenant_id="t1", user_id=user, agent_id="a1",
                         conversation_id=conv, trigger="idle", session_seq=1, closed_at=at,
                         last_activity=at, message_count=2)


async def test_a_user_erased_from_a_group_chat_leaves_the_others_to_consolidate(
        engine: AsyncEngine) -> None:
    s = Setup(engine)
    await said(s, "g1", [("u2", "I live in Rome."), ("u1", "I live in Oslo.")])
    receipt = await s.executor.erase(request(target="user", user_id="u1"))
    assert receipt.counts["conversation_message"] == 1 and "sessions_table" not in receipt.counts
    out = await s.pipeline.run(closed("g1", "u1"))  # the idle close names the last speaker
    assert out.outcome == "done"
    assert "I live in Rome." in await s.search("u2", "where do I live")
    async with engine.connect() as conn:
        users = (await conn.execute(text(
            "SELECT user_id FROM consolidation_run WHERE closed_id = 't1/g1#1'"))).scalars()
        assert list(users) == ["u2"]  # consolidated as one of the users left
        assert (await conn.execute(text(
            "SELECT COUNT(*) FROM memory WHERE user_id = 'u1'"))).scalar_one() == 0


async def test_a_summary_made_while_its_messages_are_erased_is_not_kept(
        engine: AsyncEngine) -> None:
    s = Setup(engine)
    await said(s, "c1", [("u1", f"I said thing {i}.") for i in range(25)])
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(purpose: str, messages: Any) -> str:
        started.set()
        await release.wait()
        return "The user said things."

    cache = FakeCache()
    summarizer = Summarizer(SummaryRows(engine), cache, TokenCounter())  # type: ignore[arg-type]
    model = FakeChatModel()
    model.complete = lambda messages, **kw: _answer(slow, messages)  # type: ignore[method-assign]
    task = asyncio.ensure_future(summarizer.maybe_summarize("t1", "c1", model))
    await asyncio.wait_for(started.wait(), 10)
    receipt = await s.executor.erase(request(target="conversation", conversation_id="c1"))
    assert receipt.status == "done"
    release.set()
    await task
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT COUNT(*) FROM conversation_summary"))
                ).scalar_one() == 0
    assert cache.summaries == {}


async def _answer(slow: Any, messages: Any) -> Any:
    return ChatResult(text=await slow("summary", messages), prompt_tokens=1, completion_tokens=1)


async def test_a_memory_no_consolidation_recorded_is_erased_by_its_id(
        engine: AsyncEngine) -> None:
    s = Setup(engine)
    written = await s.builtin.add(Scope("t1", "u1", "a1"), USER_CUBE,
                                  [MemoryCandidate("I keep bees.")])
    (memory_id,) = written.ids
    for alias in ("0" + memory_id, "²", "١"):  # not how memstream writes an id
        refused = await s.processor.handle(_record(request(target="memory", memory_id=alias,
                                                           erasure_id=f"x{len(alias)}")))
        assert isinstance(refused, ToSend) and refused.outcome == "rejected"
        [receipt] = refused.records
        assert ErasureReceipt.model_validate_json(receipt.value or b"").status == "rejected"
    receipt = await s.executor.erase(request(target="memory", memory_id=memory_id))
    assert receipt.counts["memory"] == 1
    assert await s.search("u1", "what do I keep") == []


async def test_erasure_ids_are_each_tenants_own(engine: AsyncEngine) -> None:
    s = Setup(engine)
    await said(s, "c1", [("u1", "I live in Oslo.")])
    first = await s.executor.erase(request(target="user", user_id="u1"))
    other = await s.executor.erase(request(tenant_id="t2", target="user", user_id="u9"))
    assert first.status == other.status == "done"  # the same erasure_id, no conflict


async def test_an_outage_is_waited_out_and_a_fault_answered(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(engine)
    calls: list[str] = []
    real = s.executor.erase

    async def flaky(req: Any) -> ErasureReceipt:
        calls.append("erase")
        if len(calls) == 1:
            raise StoreUnavailable("OperationalError: the database went away")
        return await real(req)

    monkeypatch.setattr(s.executor, "erase", flaky)
    handled = await s.processor.handle(_record(request(target="user", user_id="u1")))
    assert calls == ["erase", "erase"] and isinstance(handled, ToSend)
    [receipt] = handled.records
    assert ErasureReceipt.model_validate_json(receipt.value or b"").status == "done"

    async def broken(req: Any) -> ErasureReceipt:
        raise ValueError("a fault of memstream's own")

    monkeypatch.setattr(s.executor, "erase", broken)
    handled = await s.processor.handle(_record(request(target="user", user_id="u2",
                                                       erasure_id="e-2")))
    assert isinstance(handled, DeadLettered) and handled.reason == "erasure_blocked"
    [sent] = handled.replies
    receipt = ErasureReceipt.model_validate_json(sent.value or b"")
    assert receipt.status == "blocked" and receipt.error is not None
    assert receipt.error.code == "internal"


def _record(req: Any) -> SourceRecord:
    headers = request_headers("svc.replies", b"cid-1", 0)
    return SourceRecord("erasures", 0, 0, req.key(), req.model_dump_json().encode(), headers)
