"""A group chat's consolidation on one worker, closed by bob, racing with the
erasure of alice carried out by another worker, on MariaDB (each worker a
runtime of its own: engine, pool, built-in provider, erasure registry; the
consolidating one learns of the erasure only from the erasure log).

The run has judged alice's and bob's messages and waits to store the
candidates; meanwhile the erasure is done, or is held between its second
delete of the cubes and its second delete of the tables while the run stores
and writes. Either way nothing of alice is left in any table or cube, and
bob's memories are written.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from streams.adapters.db.messages import message_row
from streams.memory.agent_configs import StaticAgentConfigs
from streams.settings import DatabaseSettings, Settings
from streams.testing.erasure import FencePassingPublisher
from streams.wire.erasure import ErasureRequest
from streams.wire.records import ChatMessage, SessionClosed
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring
from tests.agents.fakes import FakePublisher
from tests.agents.test_erasure_group_race import SAID, Gate, GatedDeletes, GatedRuns
from tests.support.services import create_database, drop_database, mysql_cli, unique
from tests.support.wiring import settings_for_tests

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@pytest.fixture
async def workers() -> AsyncIterator[tuple[Runtime, Runtime, str]]:
    database = unique("ms_grace_")
    url = create_database(database)
    settings = settings_for_tests(database=DatabaseSettings(url=SecretStr(url)))
    one = await Runtime(settings, migrate=True).start()
    two = await Runtime(Settings(database=settings.database), migrate=False).start()
    try:
        yield one, two, database
    finally:
        await one.stop()
        await two.stop()
        drop_database(database)


def count(database: str, query: str) -> int:
    return int(mysql_cli(query, database=database).split()[0])


@pytest.mark.parametrize("erasure_held", [False, True])
async def test_a_run_on_one_worker_leaves_nothing_of_a_user_another_worker_erased(
        workers: tuple[Runtime, Runtime, str], erasure_held: bool) -> None:
    eraser, consolidator, database = workers
    executor = Wiring(eraser.settings, eraser, publisher=FencePassingPublisher(
        eraser.erasures.log, datetime.now(UTC)), agent_configs=StaticAgentConfigs({}),
        erasures=eraser.erasures).erasure_processor(_offsets, 1).executor
    pipeline = Wiring(consolidator.settings, consolidator, publisher=FakePublisher(),
                      agent_configs=StaticAgentConfigs({}),
                      erasures=consolidator.erasures).consolidation().pipeline
    judged, between = Gate(), Gate()
    pipeline.runs = GatedRuns(pipeline.runs, judged)  # type: ignore[assignment]
    executor.tables = GatedDeletes(executor.tables, between)  # type: ignore[assignment]
    if not erasure_held:
        between.opened.set()
    await consolidator.store.store([message_row(ChatMessage(
        event_id=f"g1-{i}", type="message", tenant_id="t1", user_id=user, agent_id="a1",
        conversation_id="g1", role=role, content=line,  # type: ignore[arg-type]
        created_at=T0 + timedelta(minutes=i)), T0, session_seq=1)
        for i, (user, role, line) in enumerate(SAID)])
    at = datetime.now(UTC)
    run = asyncio.ensure_future(pipeline.run(SessionClosed(
        closed_id="t1/g1#1", tenant_id="t1", user_id="bob", agent_id="a1",
        conversation_id="g1", trigger="explicit", session_seq=1, closed_at=at,
        last_activity=at, message_count=4)))
    await asyncio.wait_for(judged.reached.wait(), 30)
    erasure = asyncio.ensure_future(executor.erase(ErasureRequest.model_validate({
        "erasure_id": "e-1", "tenant_id": "t1", "target": "user", "user_id": "alice"})))
    if erasure_held:
        await asyncio.wait_for(between.reached.wait(), 30)
    else:
        assert (await asyncio.wait_for(erasure, 30)).status == "done"
    judged.opened.set()
    out = await asyncio.wait_for(run, 30)
    between.opened.set()
    assert (await asyncio.wait_for(erasure, 30)).status == "done"
    assert out.outcome == "done"
    for table, where in (("memory", "user_id = 'alice' OR content LIKE '%Oslo%'"),
                         ("consolidation_candidate", "user_id = 'alice' OR content LIKE '%Oslo%'"),
                         ("memory_origin", "user_id = 'alice'"),
                         ("conversation_message", "user_id = 'alice'")):
        assert count(database, f"SELECT COUNT(*) FROM {table} WHERE {where}") == 0, table
    assert count(database, "SELECT COUNT(*) FROM memory WHERE user_id = 'bob' AND "
                           "content = 'I live in Lisbon.' AND valid_to IS NULL") == 1


async def _offsets() -> dict[int, int]:
    return {0: 0}
