"""The worker's consolidation and query engine, built by the composition root over
the real built-in provider on SQLite (the embedded default): sessions in,
memories written, questions answered as a caller would get them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import SecretStr
from sqlalchemy import text

from streams.adapters.db.messages import MessageStore, message_row
from streams.memory.agent_configs import StaticAgentConfigs
from streams.settings import DatabaseSettings, RankingSettings, RedisSettings, Settings
from streams.wire.envelope import SourceRecord
from streams.wire.query import MemoryQuery, MemoryReply, QueryOptions
from streams.wire.records import ChatMessage, SessionClosed
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring
from tests.agents.fakes import FakePublisher

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TENANT = "t"


class BuiltinStack:
    def __init__(self, runtime: Runtime, wiring: Wiring) -> None:
        self.runtime = runtime
        self.consolidation = wiring.consolidation()
        self.engine = wiring.query_processor().engine
        self.sessions = 0

    async def session(self, lines: Sequence[tuple[str, str]], *, user: str = "alice",
                      agent: str = "travel", day: int = 0) -> list[str]:
        """One conversation of ``(role, text)`` lines on ``day``, consolidated; its event ids."""
        self.sessions += 1
        conv = f"c{self.sessions}"
        start = T0 + timedelta(days=day)
        msgs = [ChatMessage(event_id=f"{conv}-{i}", type="message", tenant_id=TENANT,
                            user_id=user, agent_id=agent, conversation_id=conv, role=role,
                            content=content, created_at=start + timedelta(minutes=i))
                for i, (role, content) in enumerate(lines)]
        await MessageStore(self.runtime.engine).store(
            [message_row(m, datetime.now(UTC)) for m in msgs])
        closed = SessionClosed(
            closed_id=f"{TENANT}/{conv}#1", tenant_id=TENANT, user_id=user, agent_id=agent,
            conversation_id=conv, trigger="explicit", session_seq=1,
            closed_at=datetime.now(UTC) + timedelta(seconds=60),
            last_activity=msgs[-1].created_at, message_count=len(msgs),
            last_event_id=msgs[-1].event_id)
        [handled] = await self.consolidation.processor.process(
            [SourceRecord("closed", 0, self.sessions, conv.encode(),
                          closed.model_dump_json().encode())])
        assert handled.outcome == "done", handled
        return [m.event_id for m in msgs]

    async def ask(self, message: str, *, user: str = "alice", agent: str = "travel",
                  top_k: int = 10, budget: int = 4000) -> MemoryReply:
        return await self.engine.answer(MemoryQuery(
            tenant_id=TENANT, user_id=user, agent_id=agent, message=message,
            options=QueryOptions(include_short_term=False, top_k=top_k,
                                 long_memory_token_budget=budget, timeout_ms=10_000)))

    async def facts(self) -> dict[str, tuple[bool, str | None]]:
        """Every fact ever stored: content -> (still valid, superseded by)."""
        async with self.runtime.engine.connect() as conn:
            rows = (await conn.execute(text(
                "SELECT content, valid_to, superseded_by FROM memory WHERE kind = 'fact'"))).all()
        return {r.content: (r.valid_to is None, r.superseded_by) for r in rows}

    async def memory_id(self, content: str) -> str:
        async with self.runtime.engine.connect() as conn:
            return str((await conn.execute(text("SELECT id FROM memory WHERE content = :c"),
                                           {"c": content})).scalar_one())


@asynccontextmanager
async def builtin_stack(tmp: Path, ranking: RankingSettings | None = None,
                        ) -> AsyncIterator[BuiltinStack]:
    url = SecretStr(f"sqlite+aiosqlite:///{tmp / 'm.db'}")
    settings = Settings(database=DatabaseSettings(url=url), redis=RedisSettings(url=None),
                        ranking=ranking or RankingSettings())
    runtime = await Runtime(settings, migrate=True).start()
    try:
        yield BuiltinStack(runtime, Wiring(settings, runtime, publisher=FakePublisher(),
                                           agent_configs=StaticAgentConfigs()))
    finally:
        await runtime.stop()
