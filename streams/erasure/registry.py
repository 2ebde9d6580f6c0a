"""ErasureRegistry: the erasures one worker knows, kept current from the erasure log.

Its :class:`~streams.erasure.rules.coverage.ErasureIndex` is what the ingest and
consolidation stages check. :meth:`ErasureRegistry.refresh` reads what was
recorded since the last look (one indexed query; every worker calls it every
``MEMSTREAM_ERASURE__SYNC_INTERVAL_S`` and before each consolidation) and,
when an erasure finished since, tells each listener: the worker's in-process
caches (scope states, memory rows, token counts, embeddings of texts) drop
what they hold, so nothing erased is served from memory.
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


class ErasureRegistry:
    def __init__(self, erasure_log: ErasureLog) -> None:
        self.log = erasure_log
        self.index = ErasureIndex()
        self._listeners: list[Callable[[], None]] = []
        self._done = 0

    def on_finished(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever an erasure finished (here or on another worker)."""
        self._listeners.append(listener)

    def add(self, mark: ErasureMark) -> None:
        """Take an erasure in at once (from its fence, or where it is carried out)."""
        if self.index.add(mark):
            log.info("erasure %s of %s %r in tenant %r now covers events up to %s",
                     mark.erasure_id, mark.target, mark.subject, mark.tenant_id,
                     mark.cutoff.isoformat())

    async def refresh(self) -> None:
        for mark in await self.log.marks_since(max(0, self.index.last_seq - OVERLAP)):
            self.add(mark)
        done = await self.log.last_done()
        if done > self._done:
            self.finished(done)

    def finished(self, seq: int) -> None:
        """Tell the listeners that erasure ``seq`` finished (once per erasure)."""
        self._done = max(self._done, seq)
        for listener in self._listeners:
            try:
                listener()
            except Exception as exc:  # one cache failing to drop must not stop the others
                log.warning("dropping a cache after an erasure failed: %s: %s",
                            type(exc).__name__, exc)
