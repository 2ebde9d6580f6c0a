"""A message passed over and delivered again after its session was consolidated is
consolidated later, by its own session: not dropped, not folded into the next one."""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from streams.adapters.db.engine import create_engine
from streams.adapters.db.messages import MessageStore
from streams.adapters.db.stale_marks import StaleMarkStore
from streams.session.stale import StaleHistories
from streams.settings import DatabaseSettings
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable
from streams.wire.envelope import SourceRecord
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import run_status
from tests.support.wiring import ingest_processor, settings_for_tests
from tests.support.worker import eventually


def record(doc: dict[str, Any], offset: int) -> SourceRecord:
    return SourceRecord("chat", 0, offset, doc["conversation_id"].encode(),
                        json.dumps(doc).encode())


def ledger(stack: Stack, closed_id: str) -> list[str]:
    rows = stack.sql("SELECT event_id FROM consolidation_ledger "
                     f"WHERE closed_id = '{closed_id}' ORDER BY message_id")
    return [r[0] for r in rows]


async def test_a_passed_over_message_is_consolidated_by_its_own_session(stack: Stack) -> None:
    worker = stack.worker().start()  # consolidates; its schema is the database's
    settings = settings_for_tests(kafka={"session_closed_topic": stack.topics['closed']})
    engine = create_engine(DatabaseSettings(url=SecretStr(stack.db_url)))
    pub, table, cache = RecordingPublisher(), InMemorySessionTable(), InMemoryHotCopy()
    proc = ingest_processor(MessageStore(engine), cache, pub, table,
                            stale=StaleHistories(cache, StaleMarkStore(engine)), settings=settings)
    s1 = [chat_event(i, "c1") for i in range(4)] + [session_end_event("c1", n=1)]
    s2 = [chat_event(10, "c1"), chat_event(11, "c1"), session_end_event("c1", n=2)]
    stream = [record(d, o) for o, d in enumerate(s1 + s2)]

    async def consolidate(events: list[bytes]) -> list[dict[str, Any]]:
        docs = [json.loads(v) for v in events]
        await stack.produce(list(events), topic=stack.topics["closed"],  # type: ignore[arg-type]
                            keys=[b"c1"] * len(events))
        for d in docs:
            await eventually(lambda d=d: run_status(stack, d["closed_id"]) == "done", 60,  # type: ignore[misc]
                             f"{d['closed_id']} consolidated")
        return docs

    try:
        # the first delivery passes over offset 2 (session 1's third message), and
        # both sessions are consolidated without it ...
        await proc.process([r for r in stream if r.offset != 2])
        first = await consolidate([r.value or b"" for r in pub.on(stack.topics["closed"])])
        assert [d["closed_id"] for d in first] == ["t1/c1#1", "t1/c1#2"]
        assert ledger(stack, "t1/c1#1") == ["t1-c1-0", "t1-c1-1", "t1-c1-3"]
        assert ledger(stack, "t1/c1#2") == ["t1-c1-10", "t1-c1-11"]
        # ... then it is delivered again, with everything after it, once the
        # guard has the partition read again from its held commit
        pub.sent.clear()
        await proc.process(stream[2:])
    finally:
        await engine.dispose()
    stamps = stack.sql("SELECT event_id, session_seq FROM conversation_message ORDER BY id")
    assert [tuple(r) for r in stamps] == [
        ("t1-c1-0", "1"), ("t1-c1-1", "1"), ("t1-c1-3", "1"), ("t1-c1-10", "2"),
        ("t1-c1-11", "2"), ("t1-c1-2", "1")]
    (late,) = await consolidate([r.value or b"" for r in pub.on(stack.topics["closed"])])
    assert late["closed_id"].startswith("t1/c1#1~") and late["trigger"] == "late"
    assert ledger(stack, late["closed_id"]) == ["t1-c1-2"]
    assert ledger(stack, "t1/c1#1") == ["t1-c1-0", "t1-c1-1", "t1-c1-3"]
    assert worker.alive
