"""SessionStateBuffer: coalesced writes to the sessions table.

Every write to a Faust table is a changelog record, and a busy conversation
changes its state with every message. The ingest processor therefore stages
the newest state of each conversation here and writes it to the table at most
once per ``interval_s``. Reads see staged states first, so the processor
always works on the newest state.

Contract: :meth:`barrier` returns only once everything staged before the call
is written to the table; the ingest pipeline calls it before acknowledging a
batch, so no offset is committed ahead of the state it produced.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from streams.session.ports import SessionTable
from streams.wire.envelope import SourceRecord


class SessionStateBuffer:
    def __init__(
        self,
        table: SessionTable,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.table = table
        self.interval_s = interval_s
        self._clock = clock
        self._sleep = sleep
        # None stages a delete (a tombstone in the changelog)
        self._pending: dict[str, tuple[dict[str, Any] | None, SourceRecord]] = {}
        self._last_flush = float("-inf")
        self.writes = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def get(self, key: str) -> dict[str, Any] | None:
        staged = self._pending.get(key)
        return staged[0] if staged is not None else self.table.get(key)

    def stored_keys(self) -> set[str]:
        """Every key with a state, staged or in the table."""
        live = {k for k in self.table.stored_keys() if self.table.get(k) is not None}
        for key, (value, _) in self._pending.items():
            if value is None:
                live.discard(key)
            else:
                live.add(key)
        return live

    def stage(self, key: str, value: dict[str, Any] | None, record: SourceRecord) -> None:
        """The newest state of ``key`` (None: delete it); ``record`` (the last
        event applied to it) decides the table partition it is written to."""
        self._pending[key] = (value, record)

    def flush(self) -> int:
        staged, self._pending = self._pending, {}
        for key, (value, record) in staged.items():
            with self.table.context(record):
                if value is None:
                    self.table.delete(key)
                else:
                    self.table.set(key, value)
        self.writes += len(staged)
        self._last_flush = self._clock()
        return len(staged)

    async def barrier(self) -> None:
        """Write everything staged so far, waiting out the rest of the interval so
        that states staged meanwhile are written by the same flush."""
        if not self._pending:
            return
        wait = self._last_flush + self.interval_s - self._clock()
        if wait > 0:
            await self._sleep(wait)
        if self._pending:
            self.flush()
