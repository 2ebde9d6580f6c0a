"""The time a coroutine holds the event loop: the sum of its steps, not its waits.

A query's time from start to reply is mostly waiting when the loop is busy with
other requests: two tenants whose requests interleave measure about the same,
whatever each costs. What one request costs the others is the time its own steps
run on the loop (scoring a cube, packing a budget) — while it runs, nothing else
does. :func:`loop_timed` drives a coroutine step by step, as the event loop
would, and adds each step's duration to a :class:`LoopTime`. Work a step hands
to a thread (``asyncio.to_thread``) is not counted: the loop is free meanwhile.
"""

from __future__ import annotations

import time
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class LoopTime:
    """Seconds a coroutine's steps ran on the loop, so far."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


@types.coroutine
def _stepped(awaitable: Awaitable[T], spent: LoopTime,
             clock: Callable[[], float]) -> Generator[Any, Any, T]:
    steps = awaitable.__await__()
    send, throw = steps.send, steps.throw
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            start = clock()
            try:
                yielded = send(value) if error is None else throw(error)
            except StopIteration as done:
                result: T = done.value
                return result
            finally:
                spent.seconds += max(0.0, clock() - start)
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                raise  # closed: the coroutine is closed below, never stepped again
            except BaseException as exc:  # a cancellation, passed on to the coroutine
                value, error = None, exc
    finally:
        steps.close()  # closed early (the task was dropped): the awaitable is too


async def loop_timed(awaitable: Awaitable[T], spent: LoopTime,
                     clock: Callable[[], float] = time.perf_counter) -> T:
    """Await ``awaitable``, adding the time its steps run on the loop to ``spent``."""
    return await _stepped(awaitable, spent, clock)
