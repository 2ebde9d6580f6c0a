"""Requests answered by a worker that does not hold their partition, when the one
that does has not begun them in time.

A partition's owner can be dead (its session not timed out yet), frozen, or
caught in a rebalance of the query group — an eager one stops every member for
as long as its slowest member takes to rejoin. Every worker therefore also
reads every query partition outside the group (the standby reader,
:class:`~streams.adapters.kafka.query_standby.QueryStandby`) and offers each
request it reads here. A request of a partition this worker holds is its own
consumer's; any other is due at :func:`~streams.query.rules.rescue.take_over_at`
— at once while this worker's own query consumer rebalances (``stopped``): in an
eager rebalance no member of the group reads, so nobody begins it — and then
handed to ``answer`` (:meth:`~streams.query.answering.QueryAnswering.rescue`),
which answers it only if no attempt at it began anywhere — one Redis round trip
decides that atomically, so one worker takes it over, and its owner, coming to
it later, finds it answered.

Bounded: a request of more than ``MAX_REQUEST_BYTES`` is left to its owner
unread; a timestamp ahead of the worker's clock counts as now, one behind it
never earlier than the delay after the request was read
(:func:`~streams.query.rules.rescue.due_at`); at most ``max_pending`` requests
wait (more are dropped) and ``concurrency`` are checked or answered at once (a
due request finding none free waits for one, and is dropped once its caller
gave up): a flood of requests costs this worker a bounded share, and the owner
still answers every request it can. Every
request offered ends counted in ``memstream_query_rescues_total`` by outcome:
``own`` (a partition held here), ``taken`` (answered here), ``left`` (begun or
answered by another, or not to be answered), ``dropped`` (over a bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable

from streams.metrics import QUERY_RESCUES
from streams.query.rules.rescue import caller_gone_at, caller_wait_ms, due_at
from streams.wire.envelope import SourceRecord

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024  # a request bigger than this is left to its owner
STOPPED_POLL_S = 0.05  # how soon a rebalance beginning makes the waiting requests due


class Rescuer:
    def __init__(self, answer: Callable[[SourceRecord], Awaitable[bool]],
                 held: Callable[[], set[int]], *, after_s: float, share: float = 0.5,
                 concurrency: int = 8, max_pending: int = 10_000,
                 stopped: Callable[[], bool] = lambda: False,
                 clock: Callable[[], float] = time.time) -> None:
        self.answer = answer
        self.held = held
        self.stopped = stopped
        self.after_s = after_s
        self.share = share
        self.max_pending = max_pending
        self.clock = clock
        self.concurrency = concurrency
        self._running = 0  # checks or answers under way (counted when started)
        self._pending: list[tuple[float, int, float, SourceRecord]] = []  # due, n, gone
        self._order = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._swept_at = 0.0  # when the waiting requests were last swept of those gone

    def offer(self, rec: SourceRecord) -> None:
        """A request read from the query topic; its time is kept if it is not this
        worker's own and has one."""
        if rec.partition in self.held():
            QUERY_RESCUES.labels("own").inc()
            return
        if rec.value is None or len(rec.value) > MAX_REQUEST_BYTES:
            QUERY_RESCUES.labels("left").inc()  # no request is this big: its owner's
            return
        now, wait_ms = self.clock(), caller_wait_ms(rec.value)
        due = due_at(rec.timestamp, now, wait_ms, after_s=self.after_s, share=self.share)
        if due is None or rec.timestamp is None:
            QUERY_RESCUES.labels("left").inc()
            return
        if len(self._pending) >= self.max_pending:
            QUERY_RESCUES.labels("dropped").inc()
            return
        gone = caller_gone_at(rec.timestamp, now, wait_ms)
        heapq.heappush(self._pending, (due, next(self._order), gone, rec))
        self._changed.set()

    def pending(self) -> int:
        return len(self._pending)

    async def run(self) -> None:
        """Hand each request to ``answer`` when it is due, until cancelled (the checks
        under way are then cancelled too)."""
        try:
            while True:
                self._changed.clear()
                now = self.clock()
                every = self.stopped()  # the group does not read: nobody else begins them
                while self._pending and (every or self._pending[0][0] <= now):
                    if self._running >= self.concurrency:
                        self._drop_gone(now)  # the rest wait for a check to end
                        break
                    _, _, gone, rec = heapq.heappop(self._pending)
                    if gone <= now:  # its caller gave up
                        QUERY_RESCUES.labels("dropped").inc()
                        continue
                    self._start(rec)
                # a rebalance beginning makes every waiting request due: looked for often
                wait = min(self._pending[0][0] - now, STOPPED_POLL_S) if self._pending else None
                if self._running >= self.concurrency and self._pending:
                    wait = STOPPED_POLL_S
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _drop_gone(self, now: float) -> None:
        """Drop the waiting requests whose caller gave up (while no check is free; at
        most every ``STOPPED_POLL_S``)."""
        if now - self._swept_at < STOPPED_POLL_S:
            return
        self._swept_at = now
        kept = [entry for entry in self._pending if entry[2] > now]
        if len(kept) < len(self._pending):
            QUERY_RESCUES.labels("dropped").inc(len(self._pending) - len(kept))
            heapq.heapify(kept)
            self._pending = kept

    def _start(self, rec: SourceRecord) -> None:
        if rec.partition in self.held():  # taken over by this worker's own consumer since
            QUERY_RESCUES.labels("own").inc()
            return
        self._running += 1
        task = asyncio.get_running_loop().create_task(self._one(rec))
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._running -= 1
        self._changed.set()  # a request waiting for a free check may go

    async def _one(self, rec: SourceRecord) -> None:
        try:
            taken = await self.answer(rec)
        except asyncio.CancelledError:
            raise
        except Exception:  # answer raises nothing but cancellation; the loop goes on
            log.exception("query rescue failed")
            taken = False
        QUERY_RESCUES.labels("taken" if taken else "left").inc()
        if taken:
            log.info("query request %s[%d]@%d answered for its partition's owner",
                     rec.topic, rec.partition, rec.offset)
