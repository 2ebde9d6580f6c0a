"""The ingest agent's intake: a tenant over its quota of events reaches the batch
sink later, in order, acknowledged only once stored; another tenant's records at
once; what is held let go at a rebalance."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from streams.ingest.pacing import EventPacer
from streams.quotas.book import DELAYED, QuotaBook
from streams.quotas.rules import Limit
from streams.wire.envelope import SourceRecord
from streams.worker.batch_sink import BatchSink
from streams.worker.commit_guard import CommitGuard
from streams.worker.paced_intake import PacedIntake

CHAT = "chat"


class Writer:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def write(self, batch: Sequence[SourceRecord]) -> None:
        self.batches.append([json.loads(r.value or b"")["event_id"] for r in batch])

    @property
    def written(self) -> list[str]:
        return [e for b in self.batches for e in b]


def item(tenant: str, i: int, offset: int) -> tuple[SourceRecord, str]:
    value = json.dumps({"tenant_id": tenant, "event_id": f"{tenant}-{i}"}).encode()
    return SourceRecord(CHAT, 0, offset, b"k", value), f"{tenant}-{i}"


guard_told: dict[str, bool] = {}  # what the commit guard was told, by handle


def intake(rate: float, burst: float) -> tuple[PacedIntake[str], Writer, list[str], list[str]]:
    book = QuotaBook("events", Limit(0.0, 1.0), {"loud": Limit(rate, burst)},
                     refused_as=DELAYED)
    pacer: EventPacer[str] = EventPacer(book, delays=lambda t: t == "loud", chat_topic=CHAT,
                                        max_wait_s=60.0, max_held=1000,
                                        max_tenant_bytes=1 << 24, max_bytes=1 << 24)
    writer, acked, let_go = Writer(), [], []
    guard_told.clear()

    async def ack(handles: list[str]) -> None:
        acked.extend(handles)

    async def go(handle: str) -> None:
        let_go.append(handle)

    sink: BatchSink[SourceRecord, str] = BatchSink(writer, ack, max_batch=100, name="t")
    return (PacedIntake(sink, pacer, let_go=go, held=guard_told.__setitem__, tick_s=0.05), writer,
            acked, let_go)


def interleaved(n: int) -> list[tuple[SourceRecord, str]]:
    out = []
    for i in range(n):
        out.append(item("loud", i, 2 * i))
        out.append(item("calm", i, 2 * i + 1))
    return out


async def eventually(check: object, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_loud_tenant_comes_later_in_order_and_a_calm_one_at_once() -> None:
    paced, writer, acked, _ = intake(rate=100.0, burst=3.0)
    await paced.add(interleaved(20))
    await paced.sink.flush()
    first = writer.written
    assert [e for e in first if e.startswith("calm")] == [f"calm-{i}" for i in range(20)]
    assert [e for e in first if e.startswith("loud")][:3] == ["loud-0", "loud-1", "loud-2"]
    assert paced.pacer is not None and paced.pacer.held >= 10
    await eventually(lambda: len(acked) == 40)
    assert [e for e in writer.written if e.startswith("loud")] == [f"loud-{i}" for i in range(20)]
    assert sorted(acked) == sorted(writer.written)  # acknowledged once written
    # each held record was told to the commit guard, and stays held for it until stored
    # (a record released behind later ones stored is not passed over)
    assert guard_told == {f"loud-{i}": True for i in range(3, 20)}
    await paced.close()


async def test_what_is_held_is_let_go_at_a_rebalance_and_what_follows_until_resumed() -> None:
    paced, writer, acked, let_go = intake(rate=1.0, burst=2.0)
    await paced.add(interleaved(5))
    assert await paced.release() == 3
    assert let_go == ["loud-2", "loud-3", "loud-4"]
    await paced.add([item("loud", 5, 10), item("calm", 5, 11)])
    assert let_go[-1] == "loud-5"
    paced.resume()
    await paced.add([item("loud", 2, 4)])  # delivered again: held, the quota spent
    await paced.sink.flush()
    assert "loud-2" not in writer.written and "calm-5" in writer.written
    assert not set(acked) & set(let_go)  # never acknowledged as stored
    # at a rebalance they stay held for the guard (the partitions are assigned afresh)
    assert guard_told == {"loud-2": True, "loud-3": True, "loud-4": True}
    await paced.close()


async def test_what_is_held_is_let_go_when_the_agent_ends() -> None:
    paced, writer, acked, let_go = intake(rate=0.5, burst=1.0)
    await paced.add(interleaved(3))
    await paced.close()  # the agent failed or stops
    assert let_go == ["loud-1", "loud-2"] and guard_told == {"loud-1": False, "loud-2": False}
    await paced.sink.flush()
    assert "loud-1" not in writer.written and "loud-1" not in acked


async def test_without_a_pacer_records_go_straight_to_the_sink() -> None:
    writer, acked = Writer(), []

    async def ack(handles: list[str]) -> None:
        acked.extend(handles)

    async def go(handle: str) -> None:
        raise AssertionError("nothing is let go")

    sink: BatchSink[SourceRecord, str] = BatchSink(writer, ack, name="t")
    paced: PacedIntake[str] = PacedIntake(sink, None, let_go=go)
    await paced.add(interleaved(3))
    await sink.flush()
    assert len(acked) == 6 and await paced.release() == 0
    await paced.close()


async def test_a_record_released_behind_later_ones_stored_is_not_passed_over() -> None:
    tp = ("chat", 0)
    guard, items = CommitGuard(), interleaved(4)
    offset = {h: rec.offset for rec, h in items}
    guard.received(tp, [rec.offset for rec, _ in items])
    seen: list[int | None] = []

    class Checking(Writer):
        async def write(self, batch: Sequence[SourceRecord]) -> None:
            seen.append(guard.skipped(tp))  # what the guard's recovery would see now
            await super().write(batch)

    async def ack(handles: list[str]) -> None:
        for h in handles:
            guard.finished(tp, offset[h])

    async def go(handle: str) -> None:
        raise AssertionError("nothing is let go")

    book = QuotaBook("events", Limit(0.0, 1.0), {"loud": Limit(100.0, 1.0)},
                     refused_as=DELAYED)
    pacer: EventPacer[str] = EventPacer(book, delays=lambda t: t == "loud", chat_topic=CHAT,
                                        max_wait_s=60.0, max_held=1000,
                                        max_tenant_bytes=1 << 24, max_bytes=1 << 24)
    writer = Checking()
    sink: BatchSink[SourceRecord, str] = BatchSink(writer, ack, name="t")
    paced = PacedIntake(sink, pacer, let_go=go, tick_s=0.01,
                        held=lambda h, held: (guard.hold if held else guard.unhold)(tp, offset[h]))
    await paced.add(items)
    await eventually(lambda: guard.safe(tp) == 8)
    assert len(writer.batches) > 1 and seen == [None] * len(writer.batches)
    await paced.close()


async def test_close_right_after_a_hold_returns() -> None:
    """A cancellation the release task's wait swallows (asyncio.wait_for, Python 3.11,
    cancelled as its wait completes) does not keep it, and close(), going."""
    paced, _, _, let_go = intake(rate=20.0, burst=1.0)
    await paced.add([item("loud", i, i) for i in range(20)])
    await asyncio.sleep(0.01)  # the task waits for the quota or a wake
    await paced.add([item("loud", i, i) for i in range(20, 40)])  # held: a wake
    await asyncio.wait_for(paced.close(), 3.0)
    assert let_go  # what was held was let go
