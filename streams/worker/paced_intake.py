"""PacedIntake: the ingest agent's records into its batch sink, through the pacer.

The agent hands :meth:`PacedIntake.add` every record it reads, with its Faust
event; the pacer (:class:`~streams.ingest.pacing.EventPacer`) says which go to
the sink now and holds the rest of a tenant over its quota of events. A task of
the intake's own adds each held record to the sink as its tenant's quota has
room. Without a pacer (no tenant's events are held back), records go straight
to the sink.

Contract:

* Records reach the sink one caller at a time (a FIFO lock), so a tenant's
  records released by the task are never overtaken by later ones of that tenant
  read meanwhile: the pacer holds a tenant's later records behind its held ones.
* Held records are not acknowledged: the commit guard keeps the chat topic's
  commit below the lowest of them, and is told each is held on purpose
  (``held(handle, True)``) so it does not take it for a record passed over,
  also once released and until it is stored (finishing a record forgets its
  hold: a record released behind later ones already stored is not passed
  over). A record is held ``max_wait_s`` at most
  (:class:`~streams.ingest.pacing.EventPacer`).
* :meth:`release` (before a rebalance or a stop, from Faust's wait for its
  records: :func:`~streams.worker.faust_wait_empty.let_go_while_waiting`) lets
  go of every held record, acknowledged to Faust only; until :meth:`resume`, a
  later record of those tenants is let go as it is read. Faust then waits only
  for what the sink is writing.
* :meth:`close` (the agent ends, or fails) lets go of what is held the same way,
  and tells the guard they are held no longer: never finished, each is then a
  record passed over, and the guard has the partition delivered again; so are
  records taken from the pacer that the sink had not taken yet.
* A failure of the task is logged at once and stops the intake: the next
  :meth:`add` raises it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from streams.ingest.pacing import EventPacer, Item
from streams.metrics import INGEST_HELD
from streams.wire.envelope import SourceRecord
from streams.worker.batch_sink import BatchSink

log = logging.getLogger(__name__)

H = TypeVar("H")


def _nothing(handle: object, held: bool) -> None:
    return None


class PacedIntake(Generic[H]):
    def __init__(self, sink: BatchSink[SourceRecord, H], pacer: EventPacer[H] | None, *,
                 let_go: Callable[[H], Awaitable[None]],
                 held: Callable[[H, bool], None] = _nothing,
                 clock: Callable[[], float] = time.time, tick_s: float = 1.0) -> None:
        self.sink = sink
        self.pacer = pacer
        self._let_go = let_go
        self._held = held
        self.clock = clock
        self.tick_s = tick_s
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._releasing: Sequence[Item[H]] = ()  # taken from the pacer, not in the sink yet
        self._closing = False

    async def add(self, items: Sequence[Item[H]]) -> None:
        """Take ``items`` (records read, in order) in now or hold them."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            raise RuntimeError("the ingest intake's release task failed") \
                from self._task.exception()
        async with self._lock:
            if self.pacer is None:
                await self._to_sink(items)
                return
            admitted = self.pacer.admit(items, self.clock())
            for _, handle in admitted.held:
                self._held(handle, True)
            for _, handle in admitted.let_go:
                await self._let_go(handle)
            await self._to_sink(admitted.ready)
            INGEST_HELD.set(self.pacer.held)
        if admitted.held:
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._release_due(), name="ingest-held")
                self._task.add_done_callback(_log_failure)
            self._wake.set()

    async def _to_sink(self, items: Sequence[Item[H]]) -> None:
        if items:
            await self.sink.add([rec for rec, _ in items], [handle for _, handle in items])

    async def _release_due(self) -> None:
        assert self.pacer is not None
        while not self._closing:  # a cancellation a wait swallowed still ends the task
            wait = self.pacer.next_in(self.clock())
            if wait is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            if wait > 0:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), min(wait, self.tick_s))
                continue
            async with self._lock:
                due = self.pacer.due(self.clock())
                INGEST_HELD.set(self.pacer.held)
                # still held for the guard until stored (finishing it forgets the hold):
                # a record released behind later ones finished is not passed over
                self._releasing = due
                await self._to_sink(due)
                self._releasing = []
            if not due:  # the quota's room and the pacer's disagree by a rounding
                await asyncio.sleep(0.01)

    async def release(self, *, passed_over: bool = False) -> int:
        """Let go of every held record (see the module docstring); how many.
        ``passed_over``: the guard is told they are no longer held (the agent ends:
        the partition must be delivered again); at a rebalance they stay held for it
        until the partitions are assigned afresh, which delivers them again."""
        if self.pacer is None:
            return 0
        held = self.pacer.release()
        INGEST_HELD.set(0)
        for _, handle in held:  # each on its own: one failing leaves the others let go
            if passed_over:
                self._held(handle, False)
            try:
                await self._let_go(handle)
            except Exception:
                log.exception("ingest: a record held back could not be let go")
        if held:
            log.info("ingest: %d records held back let go, unacknowledged", len(held))
        return len(held)

    def resume(self) -> None:
        if self.pacer is not None:
            self.pacer.resume()

    async def close(self) -> None:
        """Stop the task and let go of what is held (see the module docstring)."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for _, handle in self._releasing:  # cancelled before the sink took them
            self._held(handle, False)
            with contextlib.suppress(Exception):
                await self._let_go(handle)
        self._releasing = ()
        await self.release(passed_over=True)
        self.resume()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("ingest: the release of held records failed; the agent stops at its "
                  "next batch", exc_info=task.exception())
