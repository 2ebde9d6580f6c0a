"""A stale session state never numbers a session again (issue 42, finding 6).

A worker that kept a conversation's state after its partition moved away could
bring it back after the state was dropped elsewhere: its session number behind
the one remembered in the database, its user and outbox those of a conversation
that may have been erased since. A state quiet for the retention is checked
against the remembered number, and a stale one is brought forward: nothing of it
kept, numbering on after the remembered session.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from streams.ingest.processor import IngestProcessor
from streams.session.stale import StaleHistories
from streams.testing.ingest import InMemoryMessageStore
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable, InMemoryStaleMarks
from tests.agents.test_ingest_idle import Clock, idle_rec
from tests.agents.test_ingest_processor import ev, recs
from tests.support.wiring import ingest_processor, settings_for_tests

SETTINGS = settings_for_tests(consolidation={"idle_timeout_s": 60.0,
                                             "closed_session_retention_s": 3600.0})


def end(n: int, conv: str = "c1") -> dict[str, Any]:
    return {"event_id": f"{conv}-end-{n}", "type": "session_end", "tenant_id": "t1",
            "user_id": "u", "agent_id": "a", "conversation_id": conv,
            "created_at": "2026-11-30T09:00:00Z"}


def closed_ids(pub: RecordingPublisher) -> list[str]:
    return [json.loads(r.value or b"{}")["closed_id"] for r in pub.on("closed")]


def setup() -> tuple[InMemoryMessageStore, InMemorySessionTable, RecordingPublisher, Clock,
                     IngestProcessor]:
    store, table, pub, clock = (InMemoryMessageStore(), InMemorySessionTable(),
                                RecordingPublisher(), Clock())
    stale = StaleHistories(InMemoryHotCopy(), InMemoryStaleMarks())
    proc = ingest_processor(store, InMemoryHotCopy(), pub, table, stale=stale,
                            settings=SETTINGS, clock=clock)
    return store, table, pub, clock, proc


async def test_a_stale_state_come_back_numbers_on_after_the_remembered_session() -> None:
    store, table, pub, clock, proc = setup()
    await proc.process(recs([ev(0), end(0)]))
    await proc.states.barrier()
    kept = copy.deepcopy(table.data["t1/c1"])  # what the worker that lost the partition kept
    # meanwhile the partition's new owner: a second session, then the state is dropped
    await proc.process(recs([ev(2), end(1)], start=2))
    clock.t += 3601
    await proc.process([idle_rec(0)])
    await proc.states.barrier()
    assert "t1/c1" not in table.data and store.closed_sessions == {("t1", "c1"): 2}

    table.data["t1/c1"] = kept  # the partition back on the first worker, the stale state in it
    await proc.process(recs([ev(6), end(2)], start=6))
    assert closed_ids(pub) == ["t1/c1#1", "t1/c1#2", "t1/c1#3"]
    assert store.rows[-1]["event_id"] == "c1-6" and store.rows[-1]["session_seq"] == 3
    clock.t += 3601
    await proc.process([idle_rec(1)])
    await proc.states.barrier()
    assert store.closed_sessions == {("t1", "c1"): 3}


async def test_a_stale_open_state_is_dropped_without_a_closing_event() -> None:
    store, table, pub, clock, proc = setup()
    await proc.process(recs([ev(0)]))
    await proc.states.barrier()
    kept = copy.deepcopy(table.data["t1/c1"])  # open, with user u
    await proc.process(recs([end(0)], start=1))
    clock.t += 3601
    await proc.process([idle_rec(0)])
    await proc.states.barrier()
    assert closed_ids(pub) == ["t1/c1#1"] and store.closed_sessions == {("t1", "c1"): 1}

    table.data["t1/c1"] = kept
    await proc.process([idle_rec(1)])  # the session scan finds it idle
    await proc.states.barrier()
    assert "t1/c1" not in table.data and closed_ids(pub) == ["t1/c1#1"]
    assert store.closed_sessions == {("t1", "c1"): 1}
