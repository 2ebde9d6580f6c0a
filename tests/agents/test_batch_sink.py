"""BatchSink: order, merging, back-pressure, tails, and nothing acknowledged unstored."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from streams.worker.batch_sink import BatchSink, SinkFailedError


class Recorder:
    def __init__(self, delay: float = 0.0, fail_on: int | None = None) -> None:
        self.written: list[list[int]] = []
        self.acked: list[int] = []
        self.events: list[str] = []
        self.delay = delay
        self.fail_on = fail_on

    async def write(self, batch: Sequence[int]) -> None:
        if self.fail_on is not None and self.fail_on in batch:
            raise RuntimeError("disk on fire")
        await asyncio.sleep(self.delay)
        self.written.append(list(batch))
        self.events.append(f"write{batch[0]}")

    async def ack(self, handles: list[int]) -> None:
        assert all(any(h in b for b in self.written) for h in handles), "acked before stored"
        self.acked.extend(handles)
        self.events.append(f"ack{handles[0]}")


async def test_writes_in_order_and_acks_only_after_storing() -> None:
    r = Recorder(delay=0.01)
    sink = BatchSink(r, r.ack, max_batch=3)
    for i in range(0, 10, 2):
        await sink.add([i, i + 1], [i, i + 1])
    await sink.flush()
    assert [x for b in r.written for x in b] == list(range(10))
    assert r.acked == list(range(10))
    assert all(len(b) <= 3 for b in r.written)
    await sink.close()


async def test_batches_arriving_during_a_write_are_merged() -> None:
    r = Recorder(delay=0.05)
    sink = BatchSink(r, r.ack, max_batch=100)
    await sink.add([0], [0])
    await asyncio.sleep(0.01)  # the first write is in flight
    for i in range(1, 6):
        await sink.add([i], [i])
    await sink.flush()
    assert r.written == [[0], [1, 2, 3, 4, 5]]
    await sink.close()


async def test_add_waits_when_the_queue_is_full() -> None:
    gate = asyncio.Event()
    written: list[int] = []

    async def write(batch: list[int]) -> None:
        await gate.wait()
        written.extend(batch)

    async def ack(_: list[int]) -> None:
        return None

    sink = BatchSink(SimpleNamespace(write=write), ack, max_batch=2, max_pending=4)
    await sink.add([0, 1], [0, 1])
    await asyncio.sleep(0.01)  # writer holds [0, 1]
    await sink.add([2, 3, 4, 5], [2, 3, 4, 5])  # queue is now full
    blocked = asyncio.create_task(sink.add([6], [6]))
    await asyncio.sleep(0.02)
    assert not blocked.done()
    gate.set()
    await asyncio.wait_for(blocked, 1)
    await sink.flush()
    assert written == list(range(7))
    await sink.close()


async def test_a_failed_write_acks_nothing_and_surfaces() -> None:
    r = Recorder(fail_on=3)
    sink = BatchSink(r, r.ack, max_batch=2)
    await sink.add([0, 1], [0, 1])
    await sink.flush()
    await sink.add([2, 3], [2, 3])
    with pytest.raises(SinkFailedError):
        await sink.flush()
    with pytest.raises(SinkFailedError):
        await sink.add([4], [4])
    assert r.acked == [0, 1]
    await sink.close()


async def test_tails_overlap_the_next_write_but_keep_order() -> None:
    log: list[str] = []
    tail_gate = asyncio.Event()

    async def tail(n: int) -> None:
        log.append(f"tail{n}-start")
        if n == 0:
            await tail_gate.wait()
        log.append(f"tail{n}-end")

    async def write(batch: list[int]) -> object:
        log.append(f"write{batch[0]}")
        if batch[0] == 1:
            tail_gate.set()  # the next write ran while tail 0 was still running
        return tail(batch[0])

    async def ack(handles: list[int]) -> None:
        log.append(f"ack{handles[0]}")

    sink = BatchSink(SimpleNamespace(write=write), ack, max_batch=1)
    await sink.add([0, 1], [0, 1])
    await sink.flush()
    assert log.index("write1") < log.index("tail0-end")
    assert log.index("tail0-end") < log.index("ack0") < log.index("tail1-start")
    assert log[-1] == "ack1"
    await sink.close()
