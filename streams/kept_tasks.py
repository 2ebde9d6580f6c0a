"""KeptTasks: work left to finish in the background, kept until it has.

A task the event loop holds only weakly may be collected before it ends, and a
failure nobody retrieves is reported as "never retrieved". Work handed off so
that a caller need not wait for it (a query part unwinding past its deadline, a
Kafka client stopping) is kept here until done; its failure is logged at debug
level under ``what``, a cancellation is not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

log = logging.getLogger(__name__)


class KeptTasks:
    def __init__(self, what: str) -> None:
        self.what = what
        self._tasks: set[asyncio.Future[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def keep(self, work: Awaitable[Any]) -> asyncio.Future[Any]:
        """``work`` (a coroutine is started) kept until it is done."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    async def wait(self, timeout_s: float) -> None:
        """Back when every task kept now is done, or after ``timeout_s``."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("%s failed: %r", self.what, task.exception())
