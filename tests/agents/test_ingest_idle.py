"""Idle session end: the scan's checks, re-checked by the IngestProcessor."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from streams.ingest.processor import IngestProcessor
from streams.session.idle import IdleScanner, idle_check_record
from streams.session.stale import StaleHistories
from streams.testing.ingest import InMemoryMessageStore
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable, InMemoryStaleMarks
from streams.wire.envelope import SourceRecord
from streams.wire.headers import header
from streams.wire.records import IdleCheck
from tests.agents.test_ingest_processor import ev, recs
from tests.support.wiring import FakeParts, ingest_processor, settings_for_tests, wiring

SETTINGS = settings_for_tests(consolidation={"idle_timeout_s": 60.0})


class Clock:
    def __init__(self) -> None:
        self.t = 1_796_029_200.0  # 2026-11-30T09:00Z, an hour after the events

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def parts() -> tuple[InMemorySessionTable, RecordingPublisher, Clock, IngestProcessor]:
    table, pub, clock = InMemorySessionTable(), RecordingPublisher(), Clock()
    cache = InMemoryHotCopy()
    stale = StaleHistories(cache, InMemoryStaleMarks())
    proc = ingest_processor(InMemoryMessageStore(), cache, pub, table, stale=stale,
                            settings=SETTINGS, clock=clock)
    return table, pub, clock, proc


def idle_rec(offset: int, conv: str = "c1", tenant: str = "t1") -> SourceRecord:
    check = IdleCheck(tenant_id=tenant, conversation_id=conv, session_seq=1, idle_for_s=61,
                      checked_at=datetime.now(UTC))
    out = idle_check_record("idle", check)
    return SourceRecord("idle", 0, offset, out.key, out.value)


async def test_an_idle_session_is_closed_once(parts: Any) -> None:
    _, pub, clock, proc = parts
    await proc.process(recs([ev(0), ev(1)]))
    clock.t += 61
    res = await proc.process([idle_rec(0)])
    assert [c.trigger for c in res.closed] == ["idle"]
    (closed,) = pub.on("closed")
    doc = json.loads(closed.value or b"{}")
    assert closed.key == b"c1" and doc["closed_id"] == "t1/c1#1" and doc["message_count"] == 2
    assert (await proc.process([idle_rec(1)])).closed == []  # closed already
    assert (await proc.process([idle_rec(0)])).closed == []  # a replayed check


async def test_a_message_since_the_scan_keeps_the_session_open(parts: Any) -> None:
    table, _, clock, proc = parts
    await proc.process(recs([ev(0)]))
    clock.t += 61
    await proc.process(recs([ev(1)], start=1))  # arrives before the check is consumed
    assert (await proc.process([idle_rec(0)])).closed == []
    assert table.data["t1/c1"]["open"] is True
    clock.t += 61
    assert len((await proc.process([idle_rec(1)])).closed) == 1


async def test_checks_for_unknown_conversations_change_nothing(parts: Any) -> None:
    table, _, _, proc = parts
    res = await proc.process([idle_rec(0, conv="nobody")])
    assert res.closed == [] and table.data == {} and table.writes == 0


async def test_a_bad_check_is_dead_lettered(parts: Any) -> None:
    _, pub, _, proc = parts
    await proc.process([SourceRecord("idle", 0, 0, b"c1", b"{}")])
    (dead,) = pub.on("dlq")
    assert header(dead.headers, "memstream.source.topic") == b"idle"


async def test_messages_after_an_idle_close_open_the_next_session(parts: Any) -> None:
    _, _, clock, proc = parts
    await proc.process(recs([ev(0)]))
    clock.t += 61
    await proc.process([idle_rec(0)])
    await proc.process(recs([ev(1), ev(2)], start=1))
    clock.t += 61
    res = await proc.process([idle_rec(1)])
    assert [(c.session_seq, c.message_count) for c in res.closed] == [(2, 2)]


def test_the_scan_sends_one_check_per_idle_session() -> None:
    clock = Clock()
    scanner = IdleScanner(timeout_s=60, resend_after_s=300, clock=clock)

    def state(conv: str, last_seen: float, open_: bool = True, seq: int = 1) -> dict[str, Any]:
        return {"tenant_id": "t1", "user_id": "u", "agent_id": "a", "conversation_id": conv,
                "open": open_, "last_seen_at": last_seen, "session_seq": seq,
                "session_message_count": 1}

    items = [("t1/a", state("a", clock.t - 61)), ("t1/b", state("b", clock.t - 10)),
             ("t1/c", state("c", clock.t - 999, open_=False))]
    assert [c.conversation_id for c in scanner.scan(items)] == ["a"]
    assert scanner.open_sessions == 2
    assert scanner.scan(items) == []  # sent already
    clock.t += 301
    assert [c.conversation_id for c in scanner.scan(items)] == ["a", "b"]  # resent; b idle now
    # a session that moved on (new messages, then idle again) gets a fresh check
    items[0] = ("t1/a", state("a", clock.t - 70, seq=2))
    (check,) = scanner.scan(items)
    assert (check.conversation_id, check.session_seq) == ("a", 2)


def test_the_scan_also_finds_unsent_ends_and_expired_states() -> None:
    clock = Clock()
    scanner = IdleScanner(timeout_s=60, resend_after_s=300, retention_s=3600, clock=clock)

    def closed(conv: str, quiet: float, outbox: list[str]) -> dict[str, Any]:
        return {"tenant_id": "t1", "user_id": "u", "agent_id": "a", "conversation_id": conv,
                "open": False, "last_seen_at": clock.t - quiet, "session_seq": 2,
                "outbox": outbox}

    items = [("t1/recent", closed("recent", 100, [])),
             ("t1/unsent", closed("unsent", 301, ["{}"])),
             ("t1/unsent-new", closed("unsent-new", 100, ["{}"])),
             ("t1/old", closed("old", 3601, []))]
    assert sorted(c.conversation_id for c in scanner.scan(items)) == ["old", "unsent"]
    assert scanner.open_sessions == 0


async def test_the_wired_scanner_follows_the_ingest_agents_writes() -> None:
    table, pub, clock = InMemorySessionTable(), RecordingPublisher(), Clock()
    cache = InMemoryHotCopy()
    parts = FakeParts(store=InMemoryMessageStore(), cache=cache,
                      stale=StaleHistories(cache, InMemoryStaleMarks()))
    wired = wiring(parts, publisher=pub, settings=SETTINGS, sessions=table, clock=clock)
    proc, scanner = wired.ingest(), wired.idle_scanner()
    assert scanner.tick(lambda: table.data.items()) == []  # the first tick reads it whole
    await proc.process(recs([ev(0), ev(1)]))
    assert scanner.open_sessions == 1
    clock.t += 30
    assert scanner.tick(lambda: table.data.items()) == [] and scanner.visited == 0
    clock.t += 31
    (check,) = scanner.tick(lambda: table.data.items())
    assert (check.conversation_id, check.session_seq, scanner.visited) == ("c1", 1, 1)
    out = idle_check_record("idle", check)
    res = await proc.process([SourceRecord("idle", 0, 0, out.key, out.value)])
    assert [c.trigger for c in res.closed] == ["idle"]
    assert scanner.open_sessions == 0
    assert scanner.tick(lambda: table.data.items()) == [] and scanner.visited == 0
