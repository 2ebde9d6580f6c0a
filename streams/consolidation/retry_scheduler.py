"""RetryScheduler: closing events on ``memory.retry``, each run when it is due.

Records arrive in the order they failed, not in the order they are due (an
event on its fifth attempt waits longer than one on its second), so waiting
for the head of the partition would hold up everything behind it. Instead
every record is held, unacknowledged, in a heap by ``memstream.next_attempt_at``
and run (through :meth:`ConsolidationProcessor.handle`) when due; it is
acknowledged only after its attempt finished and whatever it led to (another
retry record, a dead letter) was delivered. Other sessions, on any partition,
are never blocked: due records run concurrently, within the processor's limit.

At most ``max_held`` records are held (waiting or running): :meth:`admit`
waits for room beyond that, so the agent stops taking records from the topic
(Faust then stops fetching it) instead of buffering a whole outage's retries
in memory; a record behind the held ones waits its turn even when it is due.

Faust waits, on a rebalance or a shutdown, until every record it handed out
was acknowledged. So when ``should_release()`` says one is under way, the
records still waiting are let go: each is handed back through its ``let_go``
callable, which acknowledges it to Faust without finishing it, so its offset is
not committed (the worker's commit guard holds the commit at the first
unfinished record) and whichever worker owns the partition next reads the
original again from the committed offset. Nothing is copied: however many
rebalances an outage spans, one record stays on the topic for each retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from streams.consolidation.failures import due_at
from streams.consolidation.processor import ConsolidationProcessor
from streams.wire.envelope import SourceRecord

log = logging.getLogger(__name__)
Ack = Callable[[], Awaitable[object]]


@dataclass(order=True)
class _Held:
    due: float
    seq: int
    record: SourceRecord = field(compare=False)
    ack: Ack = field(compare=False)
    let_go: Ack = field(compare=False)


class RetryScheduler:
    def __init__(self, processor: ConsolidationProcessor, *,
                 should_release: Callable[[], bool] = lambda: False,
                 poll_s: float = 0.5, max_held: int = 10_000,
                 clock: Callable[[], float] = time.time,
                 longest_wait_s: float | None = None) -> None:
        self.processor = processor
        self.should_release = should_release
        self.poll_s = poll_s
        self.clock = clock
        # nothing memstream schedules waits longer than the longest backoff: a record
        # due later (written by something else) would hold its offset for ever
        self.longest_wait_s = (processor.router.backoff.max_s if longest_wait_s is None
                               else longest_wait_s)
        self._heap: list[_Held] = []
        self._seq = itertools.count()
        self.max_held = max_held
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()

    @property
    def waiting(self) -> int:
        return len(self._heap)

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def held(self) -> int:
        return len(self._heap) + len(self._running)

    async def admit(self, record: SourceRecord, ack: Ack, let_go: Ack) -> None:
        """Hold ``record`` until it is due (at most ``longest_wait_s`` from now);
        ``ack`` acknowledges it once its attempt is done, ``let_go`` hands it back
        undone when it is released (it is read again from the committed offset).
        Waits while ``max_held`` records are held."""
        while self.held >= self.max_held:
            self._room.clear()
            await self._room.wait()
        due = min(due_at(record), self.clock() + self.longest_wait_s)
        heapq.heappush(self._heap, _Held(due, next(self._seq), record, ack, let_go))
        self._wake.set()

    def _freed(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._room.set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[RetryScheduler]:
        task = asyncio.create_task(self.run(), name="retry-scheduler")
        try:
            yield self
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def run(self) -> None:
        while True:
            await self.step()
            delay = self.poll_s
            if self._heap:
                delay = max(0.0, min(delay, self._heap[0].due - self.clock()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def step(self) -> int:
        """Release everything if asked to, else start what is due; returns how many
        records were started."""
        if self._heap and self.should_release():
            await self.release()
            return 0
        now = self.clock()
        started = 0
        while self._heap and self._heap[0].due <= now:
            held = heapq.heappop(self._heap)
            task = asyncio.create_task(self._attempt(held))
            self._running.add(task)
            task.add_done_callback(self._freed)
            started += 1
        return started

    async def _attempt(self, held: _Held) -> None:
        # handle() raises nothing but cancellation, and a cancelled attempt
        # must stay unacknowledged (it runs again after the restart)
        await self.processor.handle(held.record)
        await held.ack()

    async def release(self) -> int:
        """Let every waiting record go, undone (see the module docstring); returns
        how many."""
        held, self._heap = self._heap, []
        if not held:
            return 0
        self._room.set()
        for h in held:
            await h.let_go()
        log.info("let %d waiting retries go: read again from the committed offset", len(held))
        return len(held)

    async def drain(self) -> None:
        """Wait for the attempts in flight (tests, shutdown)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)
