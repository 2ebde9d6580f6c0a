"""The consolidation pipeline on an SQLite database with in-memory fakes for
the provider, the model, the cache and the publisher."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.messages import MessageStore, message_row
from streams.adapters.db.schema import consolidation as cs
from streams.consolidation.ports import SensitiveDetector
from streams.memory.agent_configs import StaticAgentConfigs
from streams.memory.registry import ModelBuilder, ModelFactory, ProviderHandle, ProviderRegistry
from streams.model_usage.meter import ModelMeter
from streams.testing.memory import FakeChatModel, FakeMemoryProvider
from streams.wire.envelope import SourceRecord
from streams.wire.records import ChatMessage, SessionClosed
from tests.agents.fakes import FakeCache, FakePublisher
from tests.support.wiring import FakeParts, settings_for_tests, wiring

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def answering(model: FakeChatModel) -> ModelBuilder:
    """A model factory's builder handing out ``model`` whatever the name."""
    return lambda name: model


class Clock:
    def __init__(self, start: datetime = T0 + timedelta(hours=1)) -> None:
        self.t = start.timestamp()

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Harness:
    def __init__(self, engine: AsyncEngine, *, model: FakeChatModel | None = None,
                 configs: dict[tuple[str, str], Any] | None = None, episodes: bool = True,
                 extra_providers: dict[str, FakeMemoryProvider] | None = None,
                 max_attempts: int = 3, atomic: bool = True,
                 consolidation: dict[str, Any] | None = None,
                 quotas: dict[str, Any] | None = None, build_model: ModelBuilder | None = None,
                 meter: ModelMeter | None = None, sensitive: SensitiveDetector | None = None,
                 settings: dict[str, Any] | None = None) -> None:
        """``build_model``: the models' builder instead of ``model`` (a real client);
        ``meter``: the model meter the pipeline keeps the budgets with; ``sensitive``:
        the detector consolidation screens with (none: nothing is screened);
        ``settings``: other settings groups."""
        self.engine = engine
        self.clock = Clock()
        self.store = MessageStore(engine)
        self.provider = FakeMemoryProvider("mysql")
        self.model = model
        self.cache = FakeCache()
        self.publisher = FakePublisher()
        self.configs = StaticAgentConfigs(configs or {})
        handles = {"mysql": ProviderHandle("mysql", self.provider, atomic_batch=atomic,
                                           episodes=episodes)}
        for name, p in (extra_providers or {}).items():
            handles[name] = ProviderHandle(name, p)
        self.registry = ProviderRegistry(handles)
        builder = build_model or (None if model is None else answering(model))
        models = ModelFactory(builder, "fake-model" if builder else None)
        settings = settings_for_tests(
            ingest={"retry_initial_s": 0.001, "retry_max_s": 0.002},
            consolidation={"retry_attempts": max_attempts, "retry_backoff_initial_s": 1.0,
                           "retry_backoff_max_s": 4.0, "concurrency": 4,
                           "expiry_sweep_interval_s": 1.0, "cube_lock_timeout_s": 10.0,
                           **(consolidation or {})}, quotas=quotas or {}, **(settings or {}))
        parts = FakeParts(engine=engine, store=self.store, cache=self.cache,
                          providers=self.registry, models=models, model_meter=meter,
                          sensitive=sensitive)
        self.wiring = wiring(parts, publisher=self.publisher, settings=settings,
                             agent_configs=self.configs, clock=self.clock, rng=lambda: 1.0)
        self.consolidation = self.wiring.consolidation()
        self.pipeline = self.consolidation.pipeline
        self.processor = self.consolidation.processor
        self.router = self.processor.router
        self.sweeper = self.consolidation.sweeper
        self.runs = self.consolidation.runs
        self.ledger = self.consolidation.ledger
        self.expiries = self.sweeper.store
        self._n = 0

    async def say(self, conv: str, lines: Sequence[tuple[str, str]], *, tenant: str = "t1",
                  user: str = "u1", agent: str = "a1", at: datetime | None = None,
                  name: str | None = None, seq: int | None = None) -> list[str]:
        """Store chat messages (role, text), one minute apart, ingested now."""
        start = at or T0 + timedelta(minutes=self._n)
        rows, ids = [], []
        for i, (role, text) in enumerate(lines):
            self._n += 1
            eid = f"{conv}-{self._n}"
            msg = ChatMessage.model_validate({
                "event_id": eid, "type": "message", "tenant_id": tenant, "user_id": user,
                "agent_id": agent, "conversation_id": conv, "role": role, "content": text,
                "name": name, "created_at": start + timedelta(minutes=i)})
            rows.append(message_row(msg, datetime.fromtimestamp(self.clock(), UTC),
                                    session_seq=seq))
            ids.append(eid)
        await self.store.store(rows)
        self.clock.advance(1)
        return ids

    def closed(self, conv: str, seq: int = 1, *, tenant: str = "t1", user: str = "u1",
               agent: str = "a1", trigger: str = "explicit") -> SessionClosed:
        now = datetime.fromtimestamp(self.clock(), UTC)
        return SessionClosed.model_validate({
            "closed_id": f"{tenant}/{conv}#{seq}", "tenant_id": tenant, "user_id": user,
            "agent_id": agent, "conversation_id": conv, "trigger": trigger, "session_seq": seq,
            "closed_at": now, "last_activity": now, "message_count": 1})

    def record(self, closed: SessionClosed, *, topic: str = "closed", offset: int = 0,
               headers: list[tuple[str, bytes]] | None = None) -> SourceRecord:
        return SourceRecord(topic, 0, offset, closed.conversation_id.encode(),
                            closed.model_dump_json().encode(), headers or [])

    async def run_row(self, closed_id: str) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(select(cs.consolidation_run).where(
                cs.consolidation_run.c.closed_id == closed_id))).first()

    async def count(self, table: Any) -> int:
        async with self.engine.connect() as conn:
            return len((await conn.execute(select(table))).all())
