"""The idle scanner keeps the full scan's decisions (which checks go out, when)
while touching only the states due: compared step by step with a walk of every
state, over random writes, deletes, rebalances and ticks."""

from __future__ import annotations

import random
from contextlib import nullcontext
from typing import Any

from streams.session.idle import IdleScanner, WatchedSessions
from streams.session.model import SessionState
from streams.wire.envelope import SourceRecord

TIMEOUT, RESEND, RETENTION = 60.0, 300.0, 3600.0


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


class Table:
    """The sessions table in a dict."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def set(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = value

    def stored_keys(self) -> list[str]:
        return list(self.data)

    def delete(self, key: str) -> None:
        self.data.pop(key, None)

    def context(self, record: SourceRecord) -> nullcontext[None]:
        return nullcontext()

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        return list(self.data.items())


class FullWalk:
    """The scan as a walk of every state on every tick (what the scanner must match)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.sent: dict[str, tuple[int, float, float]] = {}
        self.open_sessions = 0

    def scan(self, items: list[tuple[str, dict[str, Any]]]) -> set[tuple[str, int]]:
        now, checks, seen, opened = self.clock(), set(), set(), 0
        for key, value in items:
            state = SessionState.from_table(value)
            assert state is not None
            opened += state.open
            if state.open:
                is_due = state.idle_for(now) >= TIMEOUT
            elif state.outbox:
                is_due = now - state.last_seen_at >= RESEND
            else:
                is_due = state.expired(now, RETENTION)
            if not is_due:
                continue
            seen.add(key)
            sent = self.sent.get(key)
            if sent is not None and sent[:2] == (state.session_seq, state.last_seen_at) and (
                    now - sent[2] < RESEND):
                continue
            self.sent[key] = (state.session_seq, state.last_seen_at, now)
            checks.add((state.conversation_id, state.session_seq))
        self.sent = {k: v for k, v in self.sent.items() if k in seen}
        self.open_sessions = opened
        return checks


def value(conv: str, last_seen: float, *, open_: bool, outbox: bool, seq: int) -> dict[str, Any]:
    return {"tenant_id": "t1", "user_id": "u", "agent_id": "a", "conversation_id": conv,
            "open": open_, "last_seen_at": last_seen, "session_seq": seq,
            "outbox": ["{}"] if outbox else []}


def test_the_scanner_decides_as_a_walk_of_every_state() -> None:
    rng = random.Random(7)
    clock, table = Clock(), Table()
    scanner = IdleScanner(timeout_s=TIMEOUT, resend_after_s=RESEND, retention_s=RETENTION,
                          clock=clock)
    watched, walk = WatchedSessions(table, scanner), FullWalk(clock)
    convs = [f"c{i}" for i in range(40)]
    sent = 0
    for step in range(3000):
        roll = rng.random()
        conv = rng.choice(convs)
        key = f"t1/{conv}"
        if roll < 0.35:  # a message, a close, an unsent end, a published one
            old = table.get(key)
            seq = (old["session_seq"] if old else 1) + (rng.random() < 0.3)
            seen = clock.t - rng.choice([0, 0, 10, 59, 61, 299, 301, 3599, 3601])
            watched.set(key, value(conv, seen if rng.random() < 0.8 else
                                   (old["last_seen_at"] if old else seen),
                                   open_=rng.random() < 0.6, outbox=rng.random() < 0.3,
                                   seq=seq))
        elif roll < 0.40:
            watched.delete(key)
        elif roll < 0.42:
            scanner.rescan()  # a rebalance
        elif roll < 0.45:
            table.data.pop(key, None)  # a partition revoked: gone without a write ...
            scanner.rescan()  # ... and the scanner told
        else:
            clock.t += rng.choice([1, 5, 30, 60, 61, 120, 290, 301, 600])
            expected = walk.scan(table.items())
            got = {(c.conversation_id, c.session_seq) for c in scanner.tick(table.items)}
            assert got == expected, f"step {step}"
            assert scanner.open_sessions == walk.open_sessions
            assert set(scanner._sent) == set(walk.sent)
            sent += len(got)
    assert sent > 100


def test_a_tick_visits_only_the_states_due() -> None:
    clock, table = Clock(), Table()
    scanner = IdleScanner(timeout_s=TIMEOUT, resend_after_s=RESEND, retention_s=RETENTION,
                          clock=clock)
    watched = WatchedSessions(table, scanner)
    for i in range(10_000):
        watched.set(f"t1/c{i}", value(f"c{i}", clock.t, open_=True, outbox=False, seq=1))
    assert scanner.tick(table.items) == [] and scanner.visited == 10_000  # the first: whole
    assert scanner.tick(table.items) == [] and scanner.visited == 0
    for i in range(3):  # three conversations fall quiet earlier than the others
        watched.set(f"t1/c{i}", value(f"c{i}", clock.t - 50, open_=True, outbox=False, seq=1))
    clock.t += 20
    assert len(scanner.tick(table.items)) == 3 and scanner.visited == 3
    assert scanner.tick(table.items) == [] and scanner.visited == 0  # sent: not before resend
    assert scanner.open_sessions == 10_000
    clock.t += 50
    assert len(scanner.tick(table.items)) == 9_997 and scanner.visited == 9_997


async def test_read_in_parts_decides_as_a_walk_with_writes_between_the_parts() -> None:
    rng = random.Random(11)
    clock, table = Clock(), Table()
    scanner = IdleScanner(timeout_s=TIMEOUT, resend_after_s=RESEND, retention_s=RETENTION,
                          clock=clock)
    watched, walk = WatchedSessions(table, scanner), FullWalk(clock)
    convs = [f"c{i}" for i in range(60)]
    pauses = 0

    def write() -> None:
        conv = rng.choice(convs)
        key = f"t1/{conv}"
        if rng.random() < 0.15:
            watched.delete(key)
            return
        old = table.get(key)
        seq = (old["session_seq"] if old else 1) + (rng.random() < 0.3)
        watched.set(key, value(conv, clock.t - rng.choice([0, 10, 61, 301, 3601]),
                               open_=rng.random() < 0.6, outbox=rng.random() < 0.3, seq=seq))

    async def pause() -> None:  # the event loop's turn: the ingest agent writes
        nonlocal pauses
        pauses += 1
        for _ in range(rng.randint(0, 3)):
            write()

    sent = 0
    for step in range(600):
        roll = rng.random()
        if roll < 0.4:
            write()
        elif roll < 0.5:
            scanner.rescan()  # a rebalance: the next tick reads the table in parts
        else:
            clock.t += rng.choice([1, 30, 61, 301, 600])
            got = {(c.conversation_id, c.session_seq) for c in await scanner.tick_in_parts(
                lambda: list(table.data), table.get, chunk=7, pause=pause)}
            assert got == walk.scan(table.items()), f"step {step}"
            assert scanner.open_sessions == walk.open_sessions
            sent += len(got)
    assert sent > 50 and pauses > 100


async def test_a_rescan_asked_while_reading_in_parts_reads_the_table_again() -> None:
    clock, table = Clock(), Table()
    scanner = IdleScanner(timeout_s=TIMEOUT, resend_after_s=RESEND, clock=clock)
    for i in range(100):
        table.set(f"t1/c{i}", value(f"c{i}", clock.t, open_=True, outbox=False, seq=1))
    parts = 0

    async def pause() -> None:
        nonlocal parts
        parts += 1
        if parts == 3:
            scanner.rescan()  # partitions moved while the table was read

    assert await scanner.tick_in_parts(lambda: list(table.data), table.get, chunk=10,
                                       pause=pause) == []
    assert parts == 9 and scanner.visited == 100
    await scanner.tick_in_parts(lambda: list(table.data), table.get, chunk=10, pause=pause)
    assert scanner.visited == 100  # read whole again
    await scanner.tick_in_parts(lambda: list(table.data), table.get, chunk=10, pause=pause)
    assert scanner.visited == 0
