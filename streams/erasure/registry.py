"""ErasureRegistry: the erasures one worker knows, kept current from the erasure log.

Its :class:`~streams.erasure.rules.coverage.ErasureIndex` is what the ingest and
consolidation stages check. :meth:`ErasureRegistry.refresh` reads what was
recorded since the last look (one indexed query; every worker calls it every
``MEMSTREAM_ERASURE__SYNC_INTERVAL_S`` and before each consolidation) and tells
each listener of every erasure that finished since (here or on another worker),
once, with its record: the worker's in-process caches drop what that erasure
names (:func:`~streams.erasure.rules.held.held_scopes`), so nothing erased is
served from memory and other tenants' scopes stay held. Which erasures finished
is asked only when the log's newest finished one moved, or while one recorded
before it is still unfinished (they may finish out of order). The first look
tells the listeners ``None``: erasures finished before it, unnamed (drop
everything).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from streams.erasure.model import ErasureMark
from streams.erasure.ports import ErasureLog
from streams.erasure.rules.coverage import ErasureIndex

log = logging.getLogger(__name__)
# recorded erasures are read again this far below the newest seen: a record
# whose transaction committed after a later one's is not missed
OVERLAP = 100
Finished = Callable[[ErasureMark | None], None]


class ErasureRegistry:
    def __init__(self, erasure_log: ErasureLog) -> None:
        self.log = erasure_log
        self.index = ErasureIndex()
        self._listeners: list[Finished] = []
        self._done = 0  # the highest seq of a finished erasure seen
        self._looked = False
        self._waiting: dict[int, ErasureMark] = {}  # recorded, not seen finished
        self._told: set[int] = set()  # finished and told, of the seqs read again

    def on_finished(self, listener: Finished) -> None:
        """Call ``listener`` with each erasure that finished (here or on another worker);
        with ``None`` for those finished before the first look at the log."""
        self._listeners.append(listener)

    def add(self, mark: ErasureMark) -> None:
        """Take an erasure in at once (from its fence, or where it is carried out)."""
        if self.index.add(mark):
            log.info("erasure %s of %s %r in tenant %r now covers events up to %s",
                     mark.erasure_id, mark.target, mark.subject, mark.tenant_id,
                     mark.cutoff.isoformat())
        if mark.seq and mark.seq not in self._told:
            self._waiting.setdefault(mark.seq, mark)

    async def refresh(self) -> None:
        for mark in await self.log.marks_since(max(0, self.index.last_seq - OVERLAP)):
            self.add(mark)
        done = await self.log.last_done()
        if not self._looked:
            self._looked = True
            self._done = done
            if done:
                for seq in await self._finished_of_waiting():
                    del self._waiting[seq]
                    self._told.add(seq)
                self._tell(None)
        elif done > self._done or any(seq <= self._done for seq in self._waiting):
            self._done = max(self._done, done)
            for seq in await self._finished_of_waiting():
                self.finished(seq)
        self._forget_told()

    async def _finished_of_waiting(self) -> list[int]:
        """The waiting erasures up to the newest finished one that are finished."""
        unfinished = {r.mark.seq for r in await self.log.unfinished()}
        return sorted(seq for seq in self._waiting
                      if seq <= self._done and seq not in unfinished)

    def finished(self, seq: int) -> None:
        """Tell the listeners that erasure ``seq`` finished (once per erasure)."""
        self._done = max(self._done, seq)
        mark = self._waiting.pop(seq, None)
        if seq in self._told:
            return
        self._told.add(seq)
        self._tell(mark)

    def _tell(self, mark: ErasureMark | None) -> None:
        for listener in self._listeners:
            try:
                listener(mark)
            except Exception as exc:  # one cache failing to drop must not stop the others
                log.warning("dropping a cache after an erasure failed: %s: %s",
                            type(exc).__name__, exc)

    def _forget_told(self) -> None:
        """Keep only the told seqs a later read may return again."""
        floor = self.index.last_seq - OVERLAP
        if self._told and min(self._told) <= floor:
            self._told = {seq for seq in self._told if seq > floor}
