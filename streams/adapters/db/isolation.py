"""IsolatingWriter: one batch write that survives rows the database never takes.

A batch is written in one statement. When that fails with an error the
offending row will always get (:mod:`streams.adapters.db.errors`), the batch is split
in two and each half written on its own — the left half first, so rows keep
their order — down to the single rows that fail: those are refused, with
their error, and everything else is stored. With *k* bad rows among *n* that
takes about 2·k·log2(n) writes.

The rule, per failure of a part:

* ``transient``: :meth:`IsolatingWriter.run` raises it. The caller retries
  (``retry_forever``) and ``run`` carries on where it stopped: parts already
  stored stay stored, and the split already done is kept.
* ``row``: a part of several rows is split; a single row is refused.
* ``unknown``: a part of several rows is split; a single row is written again
  up to ``attempts`` times in all, then refused; the waits between are
  ``backoff_s`` doubling, without a cap (``attempts`` bounds them).

A single row is refused only when the database is shown to take other writes:
right after the row's own write failed, ``probe`` (a valid write that leaves
nothing behind) succeeds. When the probe fails too, no row is to blame — a
constraint every row breaks, a database refusing everything under an unlisted
error — and ``run`` raises the probe's error, to be retried like a transient
one. So one row never stops the stream, and a broken database never empties
the stream into the dead-letter topic.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from streams.adapters.db.errors import DbError, DbErrorKind, classify_db_error
from streams.backoff import Backoff
from streams.ingest.model import EventKey, MessageRow, RefusedRow, StoredRows
from streams.ingest.ports import MessageRows

log = logging.getLogger(__name__)

R = TypeVar("R")  # a row
K = TypeVar("K")  # what a write returns per batch: the keys it stored


@dataclass(frozen=True, slots=True)
class RowRejection:
    index: int
    """Position of the row in the batch."""
    error: DbError


@dataclass
class IsolatedWrite(Generic[K]):
    stored: set[K] = field(default_factory=set)
    """What the successful writes returned (the keys that were new)."""
    rejected: list[RowRejection] = field(default_factory=list)
    """Refused rows, in batch order."""


class IsolatingWriter(Generic[R, K]):
    def __init__(
        self,
        write: Callable[[Sequence[R]], Awaitable[set[K]]],
        rows: Sequence[R],
        *,
        probe: Callable[[], Awaitable[Any]],
        attempts: int = 3,
        backoff_s: float = 0.2,
        classify: Callable[[BaseException], DbError] = classify_db_error,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self._write = write
        self._rows = rows
        self._probe = probe
        self._attempts = max(1, attempts)
        self._backoff = Backoff(backoff_s)
        self._classify = classify
        self._sleep = sleep
        self._pending: list[tuple[int, int]] = [(0, len(rows))] if rows else []
        self.result: IsolatedWrite[K] = IsolatedWrite()

    async def run(self) -> IsolatedWrite[K]:
        """Write what is still pending; raises only what is to be retried (then call
        again: the part that failed is still pending)."""
        while self._pending:
            start, stop = self._pending[-1]
            part = self._rows[start:stop]
            try:
                self.result.stored |= await self._write(part)
                self._pending.pop()
                continue
            except Exception as exc:
                error = self._classify(exc)
                if error.kind is DbErrorKind.TRANSIENT:
                    raise
            if stop - start > 1:
                middle = (start + stop) // 2
                self._pending[-1:] = [(middle, stop), (start, middle)]  # left half first
                continue
            if error.kind is DbErrorKind.UNKNOWN:
                retried = await self._again(part)
                if retried is not None:
                    self.result.stored |= retried
                    self._pending.pop()
                    continue
            await self._refuse(start, error)
            self._pending.pop()
        return self.result

    async def _again(self, part: Sequence[R]) -> set[K] | None:
        """Retry one row failing with an unknown error; None when it keeps failing."""
        for wait in itertools.islice(self._backoff.delays(), self._attempts - 1):
            await self._sleep(wait)
            try:
                return await self._write(part)
            except Exception as exc:
                if self._classify(exc).kind is DbErrorKind.TRANSIENT:
                    raise
        return None

    async def _refuse(self, index: int, error: DbError) -> None:
        await self._probe()  # raises when the database takes no write at all
        log.warning("the database refused row %d of a batch of %d: %s",
                    index, len(self._rows), error.describe())
        self.result.rejected.append(RowRejection(index, error))


class IsolatedBatch:
    """:class:`IsolatingWriter` over message rows, its outcome in the stage's terms."""

    def __init__(self, writer: IsolatingWriter[MessageRow, EventKey]) -> None:
        self.writer = writer

    async def run(self) -> StoredRows:
        written = await self.writer.run()
        return StoredRows(set(written.stored), [
            RefusedRow(r.index, r.error.error_class, r.error.describe())
            for r in written.rejected])


class IsolatedBatches:
    """Batches of message rows written into ``rows``, each by an :class:`IsolatingWriter`
    (``backoff_s``: its first wait before writing a row again)."""

    def __init__(self, rows: MessageRows, *, backoff_s: float = 0.2) -> None:
        self.rows = rows
        self.backoff_s = backoff_s

    def batch(self, rows: Sequence[MessageRow]) -> IsolatedBatch:
        return IsolatedBatch(IsolatingWriter(self.rows.store, rows, probe=self.rows.probe,
                                             backoff_s=self.backoff_s))
