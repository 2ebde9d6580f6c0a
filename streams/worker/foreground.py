"""Foreground: a worker's queries go before its background work.

Every stage of a worker shares one event loop. A query is a chain of short steps
(a Redis read, a search, the reply), and each step waits for a turn of the loop
behind every other step that is ready. While ingest and consolidation catch up (a
worker restarted, partitions moved to it, a backlog) a turn costs the sum of their
ready steps, and a caller's deadline of a few hundred milliseconds passes within a
dozen turns, though no single step holds the loop long.

So a background stage waits at its checkpoints (a batch of chat events before it is
stored, a consolidation run before each of its stages) for the queries this worker
has under way at that moment, not for those that come later, and ``max_wait_s`` at
most. The waits of one stage take at most ``SHARE`` of each window of ``WINDOW_S``
(concurrent waits counted each; a window begins at the first wait past the last):
a steady stream of queries (one tenant's flood) slows the background by a quarter at
most, it never stops it. With no query under way a checkpoint costs nothing.
``max_wait_s`` 0 turns the waits off.

With a :class:`~streams.quotas.load_share.LoadShare`, while the worker is loaded the
queries of a tenant with most of those answered lately are not waited for; and a
checkpoint of a tenant's work (a consolidation run's) counts its size (the run's
messages) in the tenant's share of the background, and while the worker is loaded a
tenant with most of it waits there (``YIELD_STEP_S`` at a time, ``YIELD_MAX_S`` at
most per checkpoint), its consolidation slot left to another run meanwhile: one
tenant's long session gives way to the others' runs, queries and ingest, without
stopping.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from streams.consolidation.slots import current_slot
from streams.metrics import BACKGROUND_WAITED
from streams.quotas.load_share import LoadShare

T = TypeVar("T")
R = TypeVar("R")
MAX_WAIT_S = 0.1
SHARE = 0.25  # of each window, the most one stage's waits take
WINDOW_S = 1.0
YIELD_STEP_S = 0.1
YIELD_MAX_S = 1.0  # a heavy tenant's wait at one checkpoint, at most


class Foreground:
    def __init__(self, max_wait_s: float = MAX_WAIT_S, *, share: float = SHARE,
                 clock: Callable[[], float] = time.monotonic,
                 load: LoadShare | None = None) -> None:
        self.max_wait_s = max_wait_s
        self.load = load
        self.share = share
        self.clock = clock
        self._under_way: set[asyncio.Future[None]] = set()
        self._windows: dict[str, list[float]] = {}  # stage: [window start, time taken in it]

    @property
    def serving(self) -> int:
        """Queries under way in this worker."""
        return len(self._under_way)

    @contextlib.contextmanager
    def query(self, tenant: str | None = None) -> Iterator[None]:
        """Around the handling of one query (of ``tenant``: not waited for while the
        worker is loaded and the tenant has most of the queries it answered lately)."""
        if tenant is not None and self.load is not None and self.load.refuses(
                tenant, self.clock()):
            yield
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._under_way.add(done)
        try:
            yield
        finally:
            self._under_way.discard(done)
            done.set_result(None)

    def serve(self, handle: Callable[[T], Awaitable[R]],
              tenant: Callable[[T], str] | None = None) -> Callable[[T], Awaitable[R]]:
        """``handle`` counted as a query under way while it runs (``tenant``: whose)."""
        async def served(item: T) -> R:
            with self.query(tenant(item) if tenant is not None else None):
                return await handle(item)
        return served

    async def turn(self, stage: str, tenant: str | None = None, size: float = 0.0) -> None:
        """A background stage's checkpoint: back at once when no query is under way,
        else once those under way now are done, or after ``max_wait_s`` or what is
        left of the stage's share of the window; then, for work of ``tenant`` (``size``
        counted in its share), as long as it must give way (the time waited is
        counted in ``memstream_background_waited_seconds_total`` by ``stage``)."""
        await self._queries_first(stage)
        if tenant is not None and self.load is not None:
            await self._give_way(stage, tenant, size, self.load)

    async def _give_way(self, stage: str, tenant: str, size: float, load: LoadShare) -> None:
        """Wait while ``tenant`` must give way, its consolidation slot (if it holds one)
        left to another run meanwhile and taken back after."""
        begun = now = self.clock()
        if size > 0:
            load.background.add(tenant, now, size)
        if not load.yields(tenant, now):
            return
        slot = current_slot()
        if slot is not None:
            slot.give()
        try:
            while load.yields(tenant, now) and now - begun < YIELD_MAX_S:
                await asyncio.sleep(YIELD_STEP_S)
                now = self.clock()
        finally:
            BACKGROUND_WAITED.labels(stage).inc(max(0.0, self.clock() - begun))
        if slot is not None:  # not when cancelled: the run ends without a slot
            await slot.take_back()

    async def _queries_first(self, stage: str) -> None:
        if not self._under_way or self.max_wait_s <= 0:
            return
        now = self.clock()
        window = self._windows.setdefault(stage, [now, 0.0])
        if now - window[0] >= WINDOW_S:
            window[:] = [now, 0.0]
        allowed = min(self.max_wait_s, self.share * WINDOW_S - window[1])
        if allowed <= 0:
            return
        window[1] += allowed  # taken before the wait, so concurrent waits stay in the share
        begun = window[0]
        await asyncio.wait(set(self._under_way), timeout=allowed)
        took = self.clock() - now
        if window[0] == begun:  # the same window: what was not waited is given back
            window[1] -= max(0.0, allowed - took)
        BACKGROUND_WAITED.labels(stage).inc(took)
