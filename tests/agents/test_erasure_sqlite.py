"""Erasure and retention on the embedded default (SQLite), with the real built-in
provider and the real consolidation pipeline: a dry run counts what the erasure
then deletes, every table is empty of the user afterwards while the other user's
memories stay searchable, a repeat changes nothing, one memory goes alone, and a
retention run deletes old messages with their ledger rows and cached lists."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import func, or_, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.erasure_log import TableErasureLog
from streams.adapters.db.messages import MessageStore, message_row
from streams.adapters.db.schema.all_tables import metadata
from streams.erasure.registry import ErasureRegistry
from streams.memory.agent_configs import StaticAgentConfigs
from streams.memory.model import USER_CUBE, MemoryCandidate
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.registry import ModelFactory, ProviderHandle, ProviderRegistry
from streams.settings import DatabaseSettings, Settings
from streams.testing.erasure import FencePassingPublisher
from streams.wire.erasure import ErasureRequest
from streams.wire.records import ChatMessage, SessionClosed
from streams.worker.runtime import Runtime
from tests.agents.fakes import FakeCache
from tests.support.wiring import FakeParts, settings_for_tests, wiring

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
SAID = {("u1", "c1"): ["I live in Oslo.", "Noted.", "My dog is called Rex.", "Nice."],
        ("u2", "c2"): ["I live in Lisbon.", "Noted.", "My cat is called Tom.", "Nice."]}


class Setup:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.builtin = BuiltinProvider(engine)
        self.cache = FakeCache()
        self.registry = ErasureRegistry(TableErasureLog(engine))
        self.publisher = FencePassingPublisher(self.registry.log, T0)
        parts = FakeParts(engine=engine, store=MessageStore(engine), cache=self.cache,
                          providers=ProviderRegistry({"mysql": ProviderHandle(
                              "mysql", self.builtin, atomic_batch=True, episodes=True,
                              idempotent_add=True)}), models=ModelFactory(None, None))
        self.wiring = wiring(parts, publisher=self.publisher,
                             settings=settings_for_tests(erasure={"chunk_rows": 2}),
                             agent_configs=StaticAgentConfigs({}))
        self.wiring.erasures = self.registry
        self.pipeline = self.wiring.consolidation().pipeline
        self.processor = self.wiring.erasure_processor(self.offsets, 1)
        self.executor = self.processor.executor

    @staticmethod
    async def offsets() -> dict[int, int]:
        return {0: 8}

    async def said(self, created: datetime = T0, *, consolidate: bool = True) -> None:
        rows = []
        for (user, conv), lines in SAID.items():
            for i, line in enumerate(lines):
                msg = ChatMessage(event_id=f"{conv}-{i}", type="message", tenant_id="t1",
                                  user_id=user, agent_id="a1", conversation_id=conv,
                                  role="user" if i % 2 == 0 else "assistant", content=line,
                                  created_at=created + timedelta(minutes=i))
                rows.append(message_row(msg, created, session_seq=1))
            self.cache.lists[("t1", conv)] = [{"event_id": "x"}]
        await MessageStore(self.engine).store(rows)
        for (user, conv) in SAID if consolidate else ():
            at = created + timedelta(minutes=5)
            out = await self.pipeline.run(SessionClosed(
                closed_id=f"t1/{conv}#1", tenant_id="t1", user_id=user, agent_id="a1",
                conversation_id=conv, trigger="explicit", session_seq=1, closed_at=at,
                last_activity=at, message_count=4))
            assert out.outcome == "done"

    async def rows_of(self, user: str, conversation: str) -> dict[str, int]:
        out = {}
        async with self.engine.connect() as conn:
            for table in metadata.sorted_tables:
                if table.name.startswith("erasure"):
                    continue
                c = table.c
                where = []
                if "user_id" in c:
                    where.append(c.user_id == user)
                if "conversation_id" in c:
                    where.append(c.conversation_id == conversation)
                if "closed_id" in c:
                    where.append(c.closed_id.like(f"t1/{conversation}#%"))
                if where:
                    n = (await conn.execute(select(func.count()).select_from(table)
                                            .where(or_(*where)))).scalar_one()
                    if n:
                        out[table.name] = int(n)
        return out

    async def search(self, user: str, query: str) -> list[str]:
        found = await self.builtin.search(Scope("t1", user, "a1"),
                                          SearchRequest(query, [USER_CUBE], relativity=0.0))
        return [m.content for m in found]


def request(**fields: Any) -> ErasureRequest:
    return ErasureRequest.model_validate({"erasure_id": "e-1", "tenant_id": "t1", **fields})


async def test_a_user_erased_on_sqlite(engine: AsyncEngine) -> None:
    s = Setup(engine)
    await s.said()
    assert "I live in Oslo." in await s.search("u1", "where do I live")
    assert "I live in Lisbon." in await s.search("u2", "where do I live")
    before = await s.rows_of("u1", "c1")
    assert before["conversation_message"] == 4 and before["memory"] > 0

    dry = await s.executor.dry_run(request(target="user", user_id="u1", dry_run=True))
    assert dry.status == "dry_run" and await s.rows_of("u1", "c1") == before
    receipt = await s.executor.erase(request(target="user", user_id="u1"))
    assert receipt.status == "done"
    for table in ("conversation_message", "memory", "consolidation_run", "consolidation_ledger",
                  "consolidation_candidate", "memory_origin"):
        assert receipt.counts[table] == dry.counts[table] == before[table], table
    assert receipt.counts["redis_keys"] == 1 and ("t1", "c1") not in s.cache.lists
    assert await s.rows_of("u1", "c1") == {}
    assert await s.search("u1", "where do I live") == []
    assert "I live in Lisbon." in await s.search("u2", "where do I live")  # cache consistent
    async with engine.connect() as conn:  # the scope statistics still add up
        valid, counted = (await conn.execute(text(
            "SELECT (SELECT COUNT(*) FROM memory WHERE valid_to IS NULL), "
            "(SELECT SUM(doc_count) FROM memory_scope_stats)"))).one()
    assert valid == counted
    # taken in by every partition, then the states of c1 (only u1 spoke in it) deleted
    assert [(f.subject, f.round) for f in s.publisher.fences] == [("u1", 1), ("u1", 2)]

    again = await s.executor.erase(request(target="user", user_id="u1"))
    assert again.counts == receipt.counts and len(s.publisher.fences) == 2


async def test_one_memory_erased_on_sqlite(engine: AsyncEngine) -> None:
    s = Setup(engine)
    await s.said()
    async with engine.connect() as conn:
        tom = str((await conn.execute(text(
            "SELECT id FROM memory WHERE content = 'My cat is called Tom.'"))).scalar_one())
    receipt = await s.executor.erase(request(target="memory", memory_id=tom))
    assert receipt.counts["memory"] == 1 and receipt.counts["memory_origin"] == 1
    assert "My cat is called Tom." not in await s.search("u2", "what is my cat called")
    assert (await s.rows_of("u2", "c2"))["conversation_message"] == 4  # the messages stay
    assert s.publisher.fences == []  # a memory erasure covers no event
    mark = next(iter(s.registry.index._memories["t1"]))
    assert mark.source is not None and mark.source.user_id == "u2"


async def test_retention_deletes_old_messages_and_their_lists(engine: AsyncEngine) -> None:
    s = Setup(engine)
    await s.said(created=datetime.now(UTC) - timedelta(days=40))
    s.wiring.settings.erasure.message_retention_days = 30
    s.wiring.settings.erasure.summary_retention_days = 30
    counts = await s.wiring.retention().run()
    assert counts["conversation_message"] == 8 and counts["consolidation_ledger"] == 8
    assert counts["redis_keys"] == 2 and s.cache.lists == {}
    assert (await s.rows_of("u1", "c1")).get("conversation_message") is None
    assert "I live in Oslo." in await s.search("u1", "where do I live")  # memories stay
    assert await s.wiring.retention().run() == {}


async def test_a_finished_erasure_drops_what_the_worker_holds_in_memory(tmp_path: Path) -> None:
    settings = Settings(database=DatabaseSettings(
        url=SecretStr(f"sqlite+aiosqlite:///{tmp_path / 'rt.db'}")))
    rt = await Runtime(settings, migrate=True).start()
    try:
        builtin = rt.providers.get("mysql").provider
        assert isinstance(builtin, BuiltinProvider)
        scope = Scope("t1", "u1", "a1")
        await builtin.add(scope, USER_CUBE, [MemoryCandidate("I live in Oslo.")])
        assert [m.content for m in await builtin.search(scope, SearchRequest(
            "where do I live", [USER_CUBE], relativity=0.0))] == ["I live in Oslo."]
        rt.tokens("I live in Oslo.")
        assert builtin.cache._states and len(builtin.memories)
        assert len(rt.tokens._count) > 0

        await rt.erasures.refresh()  # nothing finished yet: nothing dropped
        assert len(builtin.memories)
        async with rt.engine.begin() as conn:  # an erasure another worker finished
            await conn.execute(text(
                "INSERT INTO erasure (erasure_id, tenant_id, target, subject, cutoff, "
                "chat_offsets, status, requested_at, updated_at) VALUES ('e-9', 't1', 'user', "
                "'u1', '2026-12-01', '{}', 'done', '2026-12-01', '2026-12-01')"))
        await rt.erasures.refresh()
        assert not builtin.cache._states and not len(builtin.memories)
        assert len(rt.tokens._count) == 0
        assert ("t1", "e-9") in rt.erasures.index
    finally:
        await rt.stop()


class HeldAdds:
    """The built-in provider, whose adds wait until released (a slow provider)."""

    def __init__(self, inner: BuiltinProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.adding = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def add(self, *args: Any, **kwargs: Any) -> Any:
        self.adding.set()
        await self.release.wait()
        return await self.inner.add(*args, **kwargs)


async def test_a_consolidation_writing_while_its_user_is_erased_leaves_nothing(
        engine: AsyncEngine) -> None:
    s = Setup(engine)
    held = HeldAdds(s.builtin)
    s.pipeline.registry = ProviderRegistry({"mysql": ProviderHandle(
        "mysql", held, atomic_batch=True, episodes=True, idempotent_add=True)})  # type: ignore[arg-type]
    await s.said(consolidate=False)
    at = T0 + timedelta(minutes=5)
    run = asyncio.ensure_future(s.pipeline.run(SessionClosed(
        closed_id="t1/c1#1", tenant_id="t1", user_id="u1", agent_id="a1", conversation_id="c1",
        trigger="explicit", session_seq=1, closed_at=at, last_activity=at, message_count=4)))
    await asyncio.wait_for(held.adding.wait(), 10)  # the run is writing, under the cube's lock
    erasure = asyncio.ensure_future(s.executor.erase(request(target="user", user_id="u1")))
    await asyncio.sleep(0.3)
    assert not erasure.done()  # it waits for the lock the run holds
    held.release.set()
    out = await asyncio.wait_for(run, 10)
    receipt = await asyncio.wait_for(erasure, 10)
    assert out.outcome == "erased" and receipt.status == "done"
    assert receipt.counts["memory"] > 0  # what the run wrote went with the rest
    assert await s.rows_of("u1", "c1") == {}
    assert await s.search("u1", "where do I live") == []
