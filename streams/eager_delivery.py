"""Eager record delivery for Faust's consumer.

For every record it fetches, Faust's consumer awaits
``wait_first(callback(record), suspend_flow.wait())``: deliver the record to
the streams that read its topic, unless a rebalance suspends the flow first.
Mode's ``wait_first`` makes that four tasks (the callback, the suspend flag,
the consumer's stopped and crashed flags) and an ``asyncio.wait`` per record,
about a third of what the consumer's event loop does per record.

Nearly always the callback finishes without suspending (the stream's buffer
has room). ``eager_wait_first`` runs the callback's first step in place, as the
callback's own task would run it at once anyway; when that step completes the
callback, its result is returned with no task made. When it suspends (a full
buffer), the half-run callback goes on in a task under mode's ``wait_first``
with the other awaitables, exactly as before: a suspend, stop or crash still
abandons a delivery that waits. A rebalance cannot begin during a step that
does not suspend, so nothing else changes.

``delivery_settings`` sizes polls and stream buffers so that the buffer is
seldom full in the first place (see its docstring).
"""

from __future__ import annotations

import types
from collections.abc import Generator
from typing import Any, TypedDict

from faust.transport.consumer import Consumer
from mode.services import Service, WaitResults


class _Resumed:
    """A coroutine stopped at its first suspension, awaitable again: its await
    re-yields what the coroutine waits on and then drives it to the end."""

    __slots__ = ("_coro", "_pending")

    def __init__(self, coro: types.CoroutineType[Any, Any, Any], pending: Any) -> None:
        self._coro = coro
        self._pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self._coro, self._pending
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation, thrown in by the task
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def eager_wait_first(
    self: Any, *coros: Any, timeout: Any = None  # noqa: ASYNC109  (mode's signature)
) -> WaitResults:
    """``Service.wait_first`` with the first coroutine stepped in place (see the
    module docstring); any other call shape goes to mode's own."""
    if (timeout is not None or len(coros) != 2
            or type(coros[0]) is not types.CoroutineType
            or type(coros[1]) is not types.CoroutineType
            or self._stopped.is_set() or self._crashed.is_set()):
        return await Service.wait_first(self, *coros, timeout=timeout)
    first, rest = coros[0], coros[1:]
    try:
        pending = first.send(None)
    except StopIteration as done:
        for other in rest:
            other.close()  # never started: closing it runs nothing
        return WaitResults([first], [done.value], False)
    except BaseException:
        for other in rest:
            other.close()
        raise
    return await Service.wait_first(self, _Resumed(first, pending), *rest)


class DeliverySettings(TypedDict):
    broker_max_poll_records: int
    stream_buffer_maxsize: int


def delivery_settings(batch_size: int) -> DeliverySettings:
    """Faust settings for streams read ``batch_size`` records at a time.

    A stream's buffer pauses fetching at 80 % full. A poll of at most two
    batches into a buffer of ten always fits in what is left, so delivering a
    record does not wait on a full buffer (which costs a wake-up of the
    consumer for every record the agent takes)."""
    return {"broker_max_poll_records": 2 * batch_size,
            "stream_buffer_maxsize": max(4096, 10 * batch_size)}


def install_eager_delivery() -> None:
    """Give Faust's consumer ``eager_wait_first`` (idempotent)."""
    setattr(Consumer, "wait_first", eager_wait_first)  # noqa: B010  (a method on a class)
