"""Eager record delivery: mode's ``wait_first`` semantics, without tasks when the
delivery does not suspend."""

from __future__ import annotations

import asyncio
import math
from typing import Any, NamedTuple

import pytest
from faust.transport.consumer import Consumer
from mode import Service
from mode.services import WaitResults

from streams.eager_delivery import delivery_settings, eager_wait_first, install_eager_delivery


class Fetcher(Service):
    """Stands in for Faust's consumer: a service with stopped and crashed flags."""


def count_tasks(made: list[Any]) -> None:
    loop = asyncio.get_running_loop()

    def factory(lp: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(coro)
        return asyncio.Task(coro, loop=lp, **kw)

    loop.set_task_factory(factory)


async def deliver(queue: asyncio.Queue[int], item: int, log: list[str]) -> str:
    try:
        await queue.put(item)
    except asyncio.CancelledError:
        log.append("abandoned")
        raise
    log.append(f"delivered {item}")
    return "ok"


async def test_a_delivery_that_does_not_wait_makes_no_task() -> None:
    made: list[Any] = []
    count_tasks(made)
    fetcher, suspend, log = Fetcher(), asyncio.Event(), []
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize=4)
    for i in range(3):
        result = await eager_wait_first(fetcher, deliver(queue, i, log), suspend.wait())
        assert result.results == ["ok"] and not result.stopped
    assert made == []  # mode's wait_first makes four tasks per call
    assert log == ["delivered 0", "delivered 1", "delivered 2"]
    assert [queue.get_nowait() for _ in range(3)] == [0, 1, 2]


class Blocked(NamedTuple):
    """Record 1 being delivered into a full buffer (holding record 0)."""

    suspend: asyncio.Event
    queue: asyncio.Queue[int]
    log: list[str]
    waiting: asyncio.Future[WaitResults]


async def blocked_delivery() -> Blocked:
    suspend, log = asyncio.Event(), []
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
    queue.put_nowait(0)
    waiting = asyncio.ensure_future(
        eager_wait_first(Fetcher(), deliver(queue, 1, log), suspend.wait()))
    await asyncio.sleep(0.01)
    assert not waiting.done() and log == []
    return Blocked(suspend, queue, log, waiting)


async def test_a_delivery_into_a_full_buffer_waits_for_room() -> None:
    _, queue, log, waiting = await blocked_delivery()
    assert queue.get_nowait() == 0
    result = await asyncio.wait_for(waiting, 1)
    assert isinstance(result, WaitResults) and result.results[0] == "ok"
    assert log == ["delivered 1"] and queue.get_nowait() == 1


async def test_a_suspend_abandons_a_waiting_delivery() -> None:
    suspend, queue, log, waiting = await blocked_delivery()
    suspend.set()  # a rebalance begins
    await asyncio.wait_for(waiting, 1)
    await asyncio.sleep(0)
    assert log == ["abandoned"]
    queue.get_nowait()
    await asyncio.sleep(0.01)
    assert queue.empty()  # the record was not delivered after all


async def test_errors_reach_the_caller_before_and_after_waiting() -> None:
    fetcher, suspend = Fetcher(), asyncio.Event()

    async def fails_at_once() -> None:
        raise ValueError("bad record")

    with pytest.raises(ValueError, match="bad record"):
        await eager_wait_first(fetcher, fails_at_once(), suspend.wait())

    gate = asyncio.Event()

    async def fails_later() -> None:
        await gate.wait()
        raise KeyError("late")

    waiting = asyncio.ensure_future(eager_wait_first(fetcher, fails_later(), suspend.wait()))
    await asyncio.sleep(0)
    gate.set()
    with pytest.raises(KeyError, match="late"):
        await asyncio.wait_for(waiting, 1)


async def test_a_stopped_fetcher_and_other_call_shapes_take_modes_path() -> None:
    made: list[Any] = []
    count_tasks(made)
    fetcher, suspend, log = Fetcher(), asyncio.Event(), []
    queue: asyncio.Queue[int] = asyncio.Queue()
    fetcher._stopped.set()
    result = await eager_wait_first(fetcher, deliver(queue, 1, log), suspend.wait())
    assert result.stopped and made  # mode's own wait_first, tasks and all
    made.clear()
    fetcher._stopped.clear()
    await eager_wait_first(fetcher, deliver(queue, 2, log), suspend.wait(), timeout=1.0)
    assert made


def test_installed_on_fausts_consumer() -> None:
    install_eager_delivery()
    install_eager_delivery()
    assert Consumer.wait_first is eager_wait_first


@pytest.mark.parametrize("batch", [1, 100, 1000, 5000])
def test_a_poll_always_fits_above_the_pressure_mark(batch: int) -> None:
    conf = delivery_settings(batch)
    buffer, poll = conf["stream_buffer_maxsize"], conf["broker_max_poll_records"]
    assert poll >= batch
    assert buffer - math.floor(buffer / 1.25) >= poll  # mode pauses fetching at maxsize/1.25
