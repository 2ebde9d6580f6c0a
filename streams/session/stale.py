"""StaleHistories: conversations whose Redis list may miss stored messages.

A list goes *stale* when the cache stage of a batch fails (or Redis is being
skipped after a failure) once the batch is stored in the database. Stale lists
are marked durably (:class:`~streams.session.ports.StaleMarks`), held in
the process (:class:`~streams.session.rules.stale.StaleSet`) and healed.

Marking, in this order (the writer, after a failed Redis write):

1. the batch's messages are committed in the database (stage one);
2. the touched conversations are held in the process at once, so this process
   drops their lists from now on instead of appending to them;
3. their mark is written to the database, retried with backoff until it
   commits;
4. only then does the cache stage return, and only then is the batch
   acknowledged.

So a database failure while marking never loses a mark silently: until the
mark is stored the batch stays unacknowledged, and if the process dies, the
redelivered batch finds its events stored already, which drops those lists (or
marks them again). A Redis failure never blocks or rolls back the message
write: marking comes after it.

Clearing — a mark is deleted only after its list was dropped or rebuilt in
Redis, and only if it was not marked again since (compare on ``mark_id``):

* the writer drops, in the pipeline of its next batch, the lists of every
  held conversation the batch touches and of up to ``HEAL_PER_WRITE`` others,
  then deletes their marks;
* a reader that finds a mark reads the database, rebuilds the list from it (a
  ``WATCH``ed rebuild, as on a miss) and deletes the mark it read.

Honouring: a worker reads every mark before its first batch and again on each
:meth:`StaleHistories.sync` (so it learns of marks another worker left before
a rebalance), and every Session read looks its conversation's mark up in the
database beside the Redis read: no process serves a stale list, whoever
marked it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from streams.backoff import retry_forever
from streams.metrics import CACHE_STALE, CACHE_STALE_MARKS, SINK_LATENCY
from streams.session.model import ConversationKey, MessageDoc, StaleMark
from streams.session.ports import HotCopy, StaleMarks
from streams.session.rules.stale import UNKNOWN_MARK, Entry, StaleSet
from streams.stores import CacheUnavailable, StoreRefused, StoreUnavailable

log = logging.getLogger(__name__)

STALE_LIMIT = 100_000  # conversations held in one process (~25 MB at most)
HEAL_PER_WRITE = 1_000  # held conversations a write heals besides the ones it touches
PAGE = 1_000  # marks read per query
STORE_ERRORS = (StoreUnavailable, StoreRefused)  # a failed read or clear of the marks


@dataclass(frozen=True, slots=True)
class Lookup:
    """What a reader knows of one conversation: ``stale`` means do not serve its list."""

    stale: bool
    mark: StaleMark | None = None
    held: Entry | None = None
    checked: bool = True  # False: the database did not answer


class StaleHistories:
    def __init__(
        self,
        cache: HotCopy,
        store: StaleMarks,
        *,
        retry_initial_s: float = 0.2,
        retry_max_s: float = 10.0,
        limit: int = STALE_LIMIT,
        lookup_timeout_s: float = 0.25,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.cache = cache
        self.store = store
        self.lookup_timeout_s = lookup_timeout_s
        self.held = StaleSet(limit)
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self._clock = clock

    # --------------------------------------------------------------- writer
    async def write(
        self,
        appended: Mapping[ConversationKey, Sequence[MessageDoc]],
        fresh: Iterable[ConversationKey],
        invalidate: Iterable[ConversationKey],
    ) -> None:
        """The cache stage of one batch. Held conversations' lists are dropped,
        not appended to. On a Redis failure the touched conversations are marked
        (returning only once the mark is stored), then the failure is re-raised."""
        drop = set(invalidate)
        touched = set(appended) | drop
        if not touched:
            return
        taken = self.held.take(touched, HEAL_PER_WRITE)
        try:
            with SINK_LATENCY.labels("redis").time():
                await self.cache.append(appended, fresh=fresh, invalidate=drop | set(taken))
        except CacheUnavailable:
            await self.record(touched)
            raise
        if taken:
            await self._cleared(taken)

    async def record(self, keys: Iterable[ConversationKey]) -> None:
        """Mark ``keys`` stale: held at once, stored before this returns."""
        keys = set(keys)
        begun = self.held.begin(keys)
        CACHE_STALE.set(len(self.held))
        try:
            mark_id = await retry_forever(
                lambda: self.store.mark(keys, self._clock()), what="stale-marks",
                initial_s=self.retry_initial_s, max_s=self.retry_max_s,
            )
        except BaseException:  # cancelled: still held; the batch is not acknowledged
            self.held.written(begun, UNKNOWN_MARK)
            raise
        self.held.written(begun, mark_id)
        CACHE_STALE_MARKS.labels("marked").inc(len(keys))

    async def _cleared(self, taken: Mapping[ConversationKey, Entry]) -> None:
        """The lists of ``taken`` were dropped: delete their marks."""
        marks = [StaleMark(t, c, e.mark_id) for (t, c), e in taken.items() if e.mark_id is not None]
        try:
            left = await self.store.clear(marks)
        except STORE_ERRORS as exc:  # the marks stay; the next write drops and clears again
            log.warning("clearing %d stale-history marks failed: %s: %s",
                        len(marks), type(exc).__name__, exc)
            return
        gone = {m.key for m in marks} - set(left)
        self.held.settle(taken, gone, left)
        CACHE_STALE_MARKS.labels("cleared").inc(len(gone))
        CACHE_STALE.set(len(self.held))

    async def sync(self) -> int:
        """Read every mark: hold the ones not held yet, forget held ones whose
        mark is gone (someone dropped or rebuilt the list). Returns the marks read."""
        before = self.held.snapshot()
        seen: set[ConversationKey] = set()
        after: ConversationKey | None = None
        while True:
            page = await self.store.page(after, PAGE)
            self.held.learn((m.key, m.mark_id) for m in page)
            seen.update(m.key for m in page)
            if len(page) < PAGE:
                break
            after = page[-1].key
        self.held.settle(before, set(before) - seen)
        CACHE_STALE.set(len(self.held))
        return len(seen)

    # --------------------------------------------------------------- reader
    async def lookup(self, tenant_id: str, conversation_id: str) -> Lookup:
        """Whether the conversation's list may be served. Never raises: without
        the database (an error, or no answer within ``lookup_timeout_s``, so a
        database outage does not slow cached reads down), only what this
        process holds decides."""
        held = self.held.get((tenant_id, conversation_id))
        try:
            mark = await asyncio.wait_for(self.store.get(tenant_id, conversation_id),
                                          self.lookup_timeout_s)
        except (TimeoutError, *STORE_ERRORS):
            return Lookup(stale=held is not None, held=held, checked=False)
        return Lookup(stale=held is not None or mark is not None, mark=mark, held=held)

    async def rebuilt(self, lookup: Lookup) -> None:
        """The reader rebuilt the list from the database after ``lookup`` found
        its mark: delete the mark (unless marked again since)."""
        if lookup.mark is None:
            return
        try:
            left = await self.store.clear([lookup.mark])
        except STORE_ERRORS as exc:  # the mark stays; the next read rebuilds again
            log.warning("clearing a stale-history mark failed: %s: %s", type(exc).__name__, exc)
            return
        if lookup.mark.key not in left:
            CACHE_STALE_MARKS.labels("cleared").inc()
            if lookup.held is not None:
                self.held.settle({lookup.mark.key: lookup.held}, [lookup.mark.key])
                CACHE_STALE.set(len(self.held))
