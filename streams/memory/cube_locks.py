"""One cube, one decision at a time: the cube-lock port, its errors, and the
in-process lock per key every implementation queues on first.

A cube's conflict decision and its writes happen under the cube's lock
(``streams.consolidation.writer``); an erasure of the cube's memories takes it
too. The implementation across workers is ``streams.adapters.db.cube_lock``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from streams.memory.model import CubeKey


class CubeLockError(Exception):
    """The cube's lock could not be taken or kept; nothing was written without it."""


class CubeLockTimeout(CubeLockError):
    """Another run held the cube's lock for longer than the wait allows."""


class CubeLockLost(CubeLockError):
    """The connection holding the cube's lock ended; another run may hold it now."""


class KeyedLocks:
    """One in-process lock per key, forgotten when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str, timeout_s: float | None = None) -> AsyncIterator[None]:
        """Hold ``key``'s lock; ``TimeoutError`` when not got within ``timeout_s``."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with asyncio.timeout(timeout_s):
                await lock.acquire()
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class HeldCube(Protocol):
    """A held cube lock."""

    key: CubeKey

    async def confirm(self) -> None:
        """Raise :class:`CubeLockLost` unless the lock is still this holder's; called
        before each provider write."""


class CubeLocks(Protocol):
    """One lock per cube, across every worker that writes to it."""

    timeout_s: float

    def hold(self, key: CubeKey) -> AbstractAsyncContextManager[HeldCube]:
        """Hold ``key``'s lock for the block; :class:`CubeLockTimeout` after waiting
        ``timeout_s`` in all."""
        ...
