"""Waits that release, on MariaDB: a cube held by another worker stops only the
runs that write to it. The waiting run holds no slot (another tenant's run, on a
worker of one slot, goes through meanwhile); over the lock's timeout it goes to
the retry topic, its attempt not counted, and once the cube is free its retry
completes, every memory written once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

from pydantic import SecretStr

from streams.adapters.db.messages import message_row
from streams.memory.agent_configs import StaticAgentConfigs
from streams.memory.model import USER_CUBE, cube_key
from streams.settings import ConsolidationSettings, DatabaseSettings, IngestSettings, Settings
from streams.wire.envelope import SourceRecord
from streams.wire.headers import ATTEMPT, header
from streams.wire.records import ChatMessage, SessionClosed
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring
from tests.agents.fakes import FakePublisher
from tests.integration.conftest import Stack
from tests.integration.test_consolidation_cube_lock import Worker, lock_waiters, observer
from tests.support.worker import eventually

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@asynccontextmanager
async def workers(stack: Stack) -> AsyncIterator[tuple[Worker, Worker, FakePublisher]]:
    """Two workers of one slot each; the second one's publisher."""
    settings = Settings(database=DatabaseSettings(url=SecretStr(stack.db_url)),
                        ingest=IngestSettings(retry_initial_s=0.05, retry_max_s=0.2),
                        consolidation=ConsolidationSettings(concurrency=1,
                                                            cube_lock_timeout_s=3.0))
    started: list[Worker] = []
    publisher = FakePublisher()
    try:
        for _ in range(2):
            runtime = await Runtime(settings, migrate=True).start()
            started.append(Worker(runtime, Wiring(
                settings, runtime, publisher=publisher,
                agent_configs=StaticAgentConfigs({})).consolidation()))
        yield started[0], started[1], publisher
    finally:
        for w in started:
            await w.runtime.stop()


async def session(w: Worker, tenant: str, conv: str, user: str, line: str) -> SourceRecord:
    msg = ChatMessage(event_id=f"{tenant}-{conv}-1", type="message", tenant_id=tenant,
                      user_id=user, agent_id="a1", conversation_id=conv, role="user",
                      content=line, created_at=T0 + timedelta(minutes=1))
    await w.runtime.store.store([message_row(msg, datetime.now(UTC))])
    now = datetime.now(UTC)
    closed = SessionClosed(closed_id=f"{tenant}/{conv}#1", tenant_id=tenant, user_id=user,
                           agent_id="a1", conversation_id=conv, trigger="explicit",
                           session_seq=1, closed_at=now, last_activity=now, message_count=1,
                           last_event_id=msg.event_id)
    return SourceRecord("closed", 0, 0, conv.encode(), closed.model_dump_json().encode(), [])


async def test_a_cube_held_by_another_worker_holds_no_slot_and_its_run_is_requeued(
    stack: Stack,
) -> None:
    async with workers(stack) as (other, worker, published), observer(stack) as obs:
        loud = await session(worker, "loud", "l1", "u1", "I live in Rome.")
        calm = await session(worker, "calm", "c1", "v1", "I live in Oslo.")
        locks = other.consolidation.pipeline.writer.locks
        async with locks.hold(cube_key("loud", USER_CUBE, "u1")):  # held on the other worker
            batch = asyncio.ensure_future(worker.consolidation.processor.process([loud, calm]))

            async def calm_done() -> bool:
                return stack.sql("SELECT status FROM consolidation_run "
                                 "WHERE closed_id = 'calm/c1#1'") == [["done"]]

            # the loud run waits for the cube in GET_LOCK, the calm one (on the
            # worker's only slot) goes through meanwhile
            await eventually(lambda: lock_waiters(obs, stack.database), 30,
                             "the loud run waiting for the cube")
            await eventually(calm_done, 30, "the calm tenant's run done")
            loud_done, calm_done_ = await asyncio.wait_for(batch, 30)
        assert (loud_done.outcome, calm_done_.outcome) == ("requeued", "done")
        router = worker.consolidation.processor.router
        (retry,) = published.on(router.retry_topic)
        assert header(retry.headers, ATTEMPT) == b"1" and published.on(router.dlq_topic) == []
        assert stack.sql("SELECT COUNT(*) FROM memory WHERE tenant_id = 'loud'") == [["0"]]

        again = await worker.consolidation.processor.handle(
            SourceRecord("retry", 0, 0, retry.key, retry.value, retry.headers))
        assert again.outcome == "done"
        assert stack.sql("SELECT content FROM memory WHERE tenant_id = 'loud' "
                         "AND kind = 'fact' AND valid_to IS NULL") == [["I live in Rome."]]
        assert stack.sql("SELECT COUNT(*) FROM memory WHERE tenant_id = 'loud' "
                         "AND kind = 'episode'") == [["1"]]
