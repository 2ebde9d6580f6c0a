"""BatchSink: write batches in order in the background, acknowledge only what is stored.

The consuming loop hands each batch to :meth:`BatchSink.add` and goes on
reading while the previous batch is written, so consuming and writing overlap.
Batches that arrive while a write is in flight are merged (up to
``max_batch``) into the next write, so the sink writes bigger batches exactly
when it is busiest. ``add`` waits when ``max_pending`` records are queued:
that back-pressure keeps memory bounded.

Contract (the writer is a :class:`BatchWriter`, such as the ingest processor):

* ``writer.write(batch)`` is called with records in arrival order, one call at
  a time, and must return only once the batch is durably stored (it retries
  internally; see :func:`streams.backoff.retry_forever`).
* ``write`` may return an awaitable *tail* — a second stage (such as the
  cache write) that must follow the durable write. The next batch's
  ``write`` then runs while this tail runs; tails run one after another, in
  batch order, and at most one is outstanding.
* ``ack(handles)`` is called after ``write`` — and its tail — completed,
  with the handles of that batch in order; nothing is acknowledged before it
  is stored.
* If ``write`` raises, the sink stops: the failed and queued records are
  never acknowledged (Kafka keeps them), and the next ``add`` or ``flush``
  raises :class:`SinkFailedError` so the failure is not silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
H = TypeVar("H")
T_contra = TypeVar("T_contra", contravariant=True)


class SinkFailedError(RuntimeError):
    pass


class BatchWriter(Protocol[T_contra]):
    """What the sink writes batches with."""

    async def write(self, batch: Sequence[T_contra]) -> object:
        """Store ``batch`` durably, retrying until it is, then return; what it
        returns, when awaitable, is the batch's tail (the second stage). A raise
        stops the sink."""
        ...


class BatchSink(Generic[T, H]):
    def __init__(
        self,
        writer: BatchWriter[T],
        ack: Callable[[list[H]], Awaitable[None]],
        *,
        max_batch: int = 2000,
        max_pending: int = 8000,
        name: str = "sink",
    ) -> None:
        self._writer = writer
        self._ack = ack
        self.max_batch = max_batch
        self.max_pending = max_pending
        self.name = name
        self._queue: deque[tuple[T, H]] = deque()
        self._wakeup = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._tail: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _check(self) -> None:
        if self._error is not None:
            raise SinkFailedError(
                f"{self.name} stopped after an error: {self._error!r}"
            ) from self._error

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"{self.name}-writer"
            )

    async def add(self, items: Sequence[T], handles: Sequence[H]) -> None:
        """Queue records (with their ack handles); waits while the queue is full."""
        self._check()
        self._ensure_task()
        while len(self._queue) >= self.max_pending:
            self._room.clear()
            await self._room.wait()
            self._check()
        self._queue.extend(zip(items, handles, strict=True))
        self._idle.clear()
        self._wakeup.set()

    async def flush(self) -> None:
        """Wait until everything queued so far is written and acknowledged."""
        self._check()
        if self._queue:
            self._ensure_task()
        await self._idle.wait()
        self._check()

    async def close(self) -> None:
        if self._tail is not None:
            self._tail.cancel()
            # closing: the batch stays unacknowledged
            with contextlib.suppress(BaseException):
                await self._tail
            self._tail = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _finish(self, tail: Awaitable[object] | None, handles: list[H]) -> None:
        if tail is not None:
            await tail
        await self._ack(handles)

    async def _wait_tail(self) -> None:
        if self._tail is not None:
            tail, self._tail = self._tail, None
            await tail  # re-raises a failed tail: the writer stops

    async def _run(self) -> None:
        try:
            while True:
                if not self._queue:
                    await self._wait_tail()
                    if not self._queue:
                        self._idle.set()
                        self._wakeup.clear()
                        await self._wakeup.wait()
                    continue
                n = min(self.max_batch, len(self._queue))
                taken = [self._queue.popleft() for _ in range(n)]
                self._room.set()
                result = await self._writer.write([item for item, _ in taken])
                await self._wait_tail()  # the previous batch's tail comes first
                tail = result if inspect.isawaitable(result) else None
                self._tail = asyncio.get_running_loop().create_task(
                    self._finish(tail, [h for _, h in taken]), name=f"{self.name}-tail"
                )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("%s writer failed; its records stay unacknowledged", self.name)
            self._error = exc
            self._room.set()
            self._idle.set()
