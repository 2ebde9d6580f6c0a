"""An erasure never holds the queue, nor a rebalance (issue 41, findings 4 and 7), on
SQLite with the real pipeline and the built-in provider:

* a rebalance that begins while an erasure waits for a fence (the ingest
  partitions are paused by that same rebalance) lets the request go at once:
  it is produced to the end of the queue again (same key, value and headers) and
  the next delivery continues where the record says, sending the fence only to
  the partitions that have not passed it;
* an erasure whose turn runs out (a fence a stopped partition never passes) is
  requeued the same way, and the request behind it is carried out meanwhile;
  deletes that take longer than a turn go on from where the last turn stopped;
* a signed request put back in the queue is signed afresh, so it is still
  accepted when it comes back later than a signature may be old;
* a statement the database refuses for good (a trigger refusing the deletes of
  one user's messages) blocks that erasure — ``blocked``, its record saying the
  error, code ``database`` — and the next erasure completes; once the cause is
  gone, the same request starts it again and finishes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.erasure.ports import ErasureLog
from streams.erasure.processor import REQUEUED
from streams.wire.envelope import DeadLettered, Handled, Outgoing, SourceRecord, ToSend
from streams.wire.erasure import ErasureFence, ErasureReceipt
from streams.wire.headers import SIGNATURE
from streams.wire.signing import Signing, signed_headers
from streams.wire.spring_reply import request_headers
from tests.agents.test_erasure_sqlite import T0, Setup, request
from tests.support.wiring import settings_for_tests

KEY = "t1-signing-key-of-the-test"


class Gate:
    """A publisher of fences that passes them only while ``open``, as ingest
    partitions that are paused (a rebalance) or stopped would not."""

    def __init__(self, log: ErasureLog) -> None:
        self.log = log
        self.open = False
        self.fences: list[ErasureFence] = []

    async def publish(self, records: Sequence[Outgoing]) -> None:
        for r in records:
            f = ErasureFence.model_validate_json(r.value or b"")
            self.fences.append(f)
            if self.open:
                await self.log.pass_fence(f.seq, f.partition, 0, T0, f.round)


class Turns:
    def __init__(self, engine: AsyncEngine, *, turn_s: float = 30.0,
                 signed: bool = False) -> None:
        self.setup = s = Setup(engine)
        self.gate = Gate(s.registry.log)
        self.rebalancing = False
        s.wiring.publisher = self.gate
        query = {"require_signature": True, "tenant_keys": {"t1": KEY}} if signed else {}
        s.wiring.settings = settings_for_tests(erasure={"chunk_rows": 2, "turn_s": turn_s},
                                               query=query)
        self.processor = s.wiring.erasure_processor(s.offsets, 2,
                                                    should_release=lambda: self.rebalancing)

    async def handle(self, rec: SourceRecord) -> Handled:
        return await self.processor.handle(rec)


def record(req: Any, *, signed_at: int | None = None) -> SourceRecord:
    headers = request_headers("svc.replies", b"cid-1", 0)
    body = req.model_dump_json().encode()
    if signed_at is not None:
        headers = [*headers, *signed_headers(KEY, signed_at, "svc.replies", 0, b"cid-1", body)]
    return SourceRecord("erasures", 0, 0, req.key(), body, headers)


def receipt_of(handled: Handled) -> ErasureReceipt:
    sent = handled.records if isinstance(handled, ToSend) else handled.replies
    [r] = sent
    return ErasureReceipt.model_validate_json(r.value or b"")


async def until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.01)


async def test_a_rebalance_lets_an_erasure_waiting_for_its_fence_go(
        engine: AsyncEngine) -> None:
    t = Turns(engine)
    await t.setup.said()
    rec = record(request(target="user", user_id="u1"))
    task = asyncio.create_task(t.handle(rec))
    await until(lambda: len(t.gate.fences) == 2)  # one per partition; neither passes
    await asyncio.sleep(0.5)
    assert not task.done()  # it waits for them, as it must

    t.rebalancing = True  # Faust pauses the partitions and waits for this record
    started = time.monotonic()
    handled = await asyncio.wait_for(task, 5)
    assert time.monotonic() - started < 1.0
    assert isinstance(handled, ToSend) and handled.outcome == REQUEUED
    [copy] = handled.records
    assert (copy.topic, copy.key, copy.value, copy.headers) == (
        rec.topic, rec.key, rec.value, rec.headers)
    kept = await t.setup.registry.log.get("t1", "e-1")
    assert kept is not None and kept.status == "planned"

    # partition 0 passed meanwhile; the next owner sends the fence to partition 1 only
    await t.setup.registry.log.pass_fence(kept.mark.seq, 0, 0, T0)
    t.rebalancing, t.gate.open = False, True
    done = await t.handle(copy_of(copy))
    assert receipt_of(done).status == "done"
    assert [(f.partition, f.round) for f in t.gate.fences] == [(0, 1), (1, 1), (1, 1), (0, 2)]
    assert await t.setup.rows_of("u1", "c1") == {}


def copy_of(out: Outgoing) -> SourceRecord:
    return SourceRecord(out.topic, 0, 1, out.key, out.value, list(out.headers))


async def test_a_turn_that_runs_out_requeues_and_the_queue_goes_on(engine: AsyncEngine) -> None:
    t = Turns(engine, turn_s=0.5)
    await t.setup.said()
    first = record(request(target="user", user_id="u1"))
    started = time.monotonic()
    handled = await t.handle(first)  # no partition passes the fence: its turn runs out
    assert time.monotonic() - started < 2.0
    assert isinstance(handled, ToSend) and handled.outcome == REQUEUED

    async with engine.connect() as conn:
        tom = str((await conn.execute(text(
            "SELECT id FROM memory WHERE content = 'My cat is called Tom.'"))).scalar_one())
    behind = await t.handle(record(request(target="memory", memory_id=tom, erasure_id="e-2")))
    assert receipt_of(behind).status == "done"  # the request behind it was not held up

    t.gate.open = True  # the partitions are back
    again = await t.handle(first)
    for _ in range(20):  # a slow machine may need more than one turn of 0.5 s for the deletes
        if not (isinstance(again, ToSend) and again.outcome == REQUEUED):
            break
        [copy] = again.records
        again = await t.handle(copy_of(copy))
    assert receipt_of(again).status == "done" and await t.setup.rows_of("u1", "c1") == {}


async def test_deletes_longer_than_a_turn_go_on_where_the_last_turn_stopped(
        engine: AsyncEngine) -> None:
    t = Turns(engine, turn_s=0.5)
    t.gate.open = True
    await t.setup.said()
    ticks = iter(range(1_000_000))
    t.processor.executor.monotonic = lambda: next(ticks) * 0.05  # ten checks a turn
    first = record(request(target="user", user_id="u1"))
    turns = 0
    while isinstance(again := await t.handle(first), ToSend) and again.outcome == REQUEUED:
        turns += 1
        assert turns < 100
    assert turns >= 2
    receipt = receipt_of(again)
    assert receipt.status == "done" and await t.setup.rows_of("u1", "c1") == {}
    # each chunk stayed deleted and counted once, whichever turn deleted it
    assert receipt.counts["conversation_message"] == 4
    assert receipt.counts["consolidation_ledger"] == 4


async def test_a_signed_request_put_back_is_signed_afresh(engine: AsyncEngine) -> None:
    t = Turns(engine, turn_s=0.3, signed=True)
    await t.setup.said()
    now = int(time.time())
    rec = record(request(target="user", user_id="u1"), signed_at=now - 200)
    handled = await t.handle(rec)
    assert isinstance(handled, ToSend) and handled.outcome == REQUEUED
    [copy] = handled.records
    assert [v for k, v in copy.headers if k == SIGNATURE] != [
        v for k, v in rec.headers if k == SIGNATURE]
    signing = Signing({"t1": KEY}, max_age_s=300)
    later = now + 250  # the original is 450 s old by then, the copy 250 s at most
    assert signing.refusal("t1", rec.headers, rec.value, "svc.replies", later) is not None
    assert signing.refusal("t1", copy.headers, copy.value, "svc.replies", later) is None


async def test_a_statement_the_database_refuses_blocks_only_its_erasure(
        engine: AsyncEngine) -> None:
    t = Turns(engine)
    t.gate.open = True
    await t.setup.said()
    async with engine.begin() as conn:  # the operator's trigger refuses u1's deletes
        await conn.execute(text(
            "CREATE TRIGGER keep_u1 BEFORE DELETE ON conversation_message "
            "WHEN OLD.user_id = 'u1' BEGIN SELECT RAISE(ABORT, 'kept by policy'); END"))
    first = record(request(target="user", user_id="u1"))
    blocked = await asyncio.wait_for(t.handle(first), 10)  # not retried in place
    assert isinstance(blocked, DeadLettered) and blocked.reason == "erasure_blocked"
    receipt = receipt_of(blocked)
    assert receipt.status == "blocked" and receipt.error is not None
    assert receipt.error.code == "database" and "IntegrityError" in receipt.error.message
    kept = await t.setup.registry.log.get("t1", "e-1")
    assert kept is not None and kept.status == "blocked"
    assert kept.error is not None and "IntegrityError" in kept.error
    assert "u1" not in kept.error and "DELETE" not in kept.error  # no statement, no value

    second = await t.handle(record(request(target="user", user_id="u2", erasure_id="e-2")))
    assert receipt_of(second).status == "done"
    assert await t.setup.rows_of("u2", "c2") == {}

    async with engine.begin() as conn:  # the cause is fixed; the request re-driven
        await conn.execute(text("DROP TRIGGER keep_u1"))
    again = await t.handle(first)
    assert receipt_of(again).status == "done" and await t.setup.rows_of("u1", "c1") == {}
    done = await t.setup.registry.log.get("t1", "e-1")
    assert done is not None and done.status == "done" and done.error is None
