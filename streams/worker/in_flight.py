"""InFlight: records started as they arrive, each acknowledged once it is handled.

The consuming loop hands each record to :meth:`InFlight.add` and reads on while
earlier records still run, so a short run never waits behind a long one read
before it (the consolidation agent: a session end of one tenant behind a long
part of another's session).

Contract (``run(item, begin)`` handles one record and calls ``begin()`` once its
work begins — until then it only waits, and cancelling it leaves nothing done;
``ack`` acknowledges it):

* ``ack(item)`` is called after ``run(item, begin)`` returned, and only then: a record
  is acknowledged once it is handled (for consolidation: stored, or its retry
  or dead-letter record delivered), never before.
* Records of one ``key`` run one at a time, in the order added: one starts
  after the one before it of its key was acknowledged. Records of different
  keys run at the same time and finish in any order; the commit guard commits
  up to the lowest unfinished offset, so the stream's topic must be one of its
  out-of-order topics (``out_of_order_topics`` in :mod:`.faust_glue`).
* At most ``limit`` records are pending (added and not yet acknowledged:
  running, or waiting for their key or whatever ``run`` waits for); ``add``
  waits for room, so the loop reads nothing more meanwhile.
* Leaving ``async with`` normally waits for every pending record; leaving it by
  an exception — the agent cancelled when the worker stops — cancels the
  pending runs, and what they had not handled stays unacknowledged (Kafka
  delivers it again).
* A ``run`` or ``ack`` that raises (anything but cancellation) stops the
  flight: the other pending runs are cancelled unacknowledged, and the next
  ``add``, or leaving ``async with``, raises :class:`FlightFailedError` from it.

* :meth:`InFlight.release` lets go of every pending record whose work has not
  begun: its run is cancelled, it is not acknowledged, and it is handed to
  ``let_go`` (the agent tells Faust it is done with it, and the commit guard,
  which never heard it finished, keeps the commit below it: Kafka delivers it
  again). Until :meth:`InFlight.resume`, each record added is let go the same
  way at once: read after one let go, it must not begin before that one is
  delivered again (a conversation's later session end before its earlier one).
  Faust waits for every record it handed out before a rebalance goes on and
  before the worker stops (:mod:`.faust_wait_empty`, which calls these): it then
  waits only for the runs under way, not for every record read ahead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from functools import partial
from types import TracebackType
from typing import Generic, TypeVar

from prometheus_client import Gauge

log = logging.getLogger(__name__)

H = TypeVar("H")


class FlightFailedError(RuntimeError):
    pass


Begin = Callable[[], None]


class InFlight(Generic[H]):
    def __init__(self, run: Callable[[H, Begin], Awaitable[object]],
                 ack: Callable[[H], Awaitable[None]], *, key: Callable[[H], Hashable],
                 limit: int, gauge: Gauge | None = None, name: str = "in-flight") -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._run = run
        self._ack = ack
        self._key = key
        self.limit = limit
        self._gauge = gauge
        self.name = name
        self._room = asyncio.Semaphore(limit)
        self._tasks: dict[asyncio.Task[None], H] = {}  # the pending records, by task
        self._last: dict[Hashable, asyncio.Task[None]] = {}  # the newest record of each key
        self._begun: set[asyncio.Task[None]] = set()  # pending records whose work began
        self._let_go: Callable[[H], Awaitable[None]] | None = None  # released, until resumed
        self._failure: BaseException | None = None

    @property
    def pending(self) -> int:
        """Records added and not yet acknowledged (nor cancelled)."""
        return len(self._tasks)

    async def add(self, item: H) -> None:
        """Start ``item`` (after the pending record of its key), once there is room."""
        self._raise_failure()
        if self._let_go is not None:  # released, not resumed yet: let go at once
            await self._let_go(item)
            return
        await self._room.acquire()
        if self._failure is not None:
            self._room.release()
            self._raise_failure()
        if self._let_go is not None:  # released while this waited for room
            self._room.release()
            await self._let_go(item)
            return
        key = self._key(item)
        task = asyncio.create_task(self._one(item, self._last.get(key)),
                                   name=f"{self.name}:{key!r}")
        self._last[key] = task
        self._tasks[task] = item
        if self._gauge is not None:
            self._gauge.inc()
        task.add_done_callback(partial(self._done, key))

    async def _one(self, item: H, before: asyncio.Task[None] | None) -> None:
        if before is not None:
            await asyncio.wait([before])
            if self._failure is not None or before.cancelled():
                raise asyncio.CancelledError  # the flight stops: nothing after it runs
        task = asyncio.current_task()
        await self._run(item, lambda: self._begun.add(task) if task is not None else None)
        await self._ack(item)

    def _done(self, key: Hashable, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        self._begun.discard(task)
        if self._last.get(key) is task:
            del self._last[key]
        self._room.release()
        if self._gauge is not None:
            self._gauge.dec()
        if task.cancelled() or task.exception() is None or self._failure is not None:
            return
        self._failure = task.exception()
        log.error("%s: a record failed (%r); the other pending records are cancelled, "
                  "unacknowledged", self.name, self._failure)
        for other in self._tasks:
            other.cancel()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise FlightFailedError(f"{self.name} stopped") from self._failure

    async def join(self) -> None:
        """Wait until every pending record is acknowledged (or the flight failed)."""
        try:
            while self._tasks:
                await asyncio.wait(set(self._tasks))
        except BaseException:
            await self.cancel()
            raise
        self._raise_failure()

    async def release(self, let_go: Callable[[H], Awaitable[None]]) -> int:
        """Cancel every pending record whose work has not begun and hand each to
        ``let_go``, unacknowledged; how many. The runs under way go on. Until
        :meth:`resume`, every record added is handed to ``let_go`` at once, never
        begun: it was read after a record let go, which is delivered again first."""
        self._let_go = let_go
        waiting = [t for t in self._tasks if t not in self._begun]
        items = {t: self._tasks[t] for t in waiting}
        for task in waiting:
            task.cancel()
        # before anything is added again (the cancelled give their room back as they
        # end): a record added later of a key with a run under way waits for it
        self._last = {self._key(self._tasks[t]): t for t in self._begun}
        await asyncio.gather(*waiting, return_exceptions=True)
        released = [items[t] for t in waiting if t.cancelled()]
        for item in released:  # each on its own: one failing leaves the others let go
            try:
                await let_go(item)
            except Exception:
                log.exception("%s: a record not begun could not be let go", self.name)
        if released:
            log.info("%s: %d records not begun let go, unacknowledged", self.name,
                     len(released))
        return len(released)

    def resume(self) -> None:
        """Begin the records added from now on again (after :meth:`release`)."""
        self._let_go = None

    async def cancel(self) -> None:
        """Cancel every pending run; what it had not handled stays unacknowledged."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> InFlight[H]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if exc_type is None:
            await self.join()
        else:
            await self.cancel()
