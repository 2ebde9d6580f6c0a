"""Cube locks over the database: one lock per memory cube, across workers and processes.

The conflict decision of a cube's candidates (the provider's search, then
store / skip / supersede) and their write happen under the cube's lock
(:mod:`streams.consolidation.writer`), so two runs writing to one cube — two sessions of one user,
on one worker or two, or two users of one agent — never both find nothing
and both store. A cube is :class:`~streams.memory.model.CubeKey`: tenant,
cube name, and the user for ``user_profile``.

On MySQL / MariaDB the lock is a named lock (``GET_LOCK``) taken on a
connection of its own and held for the critical section. The server releases
it when that connection ends, so a worker that dies (SIGKILL, a lost network,
``KILL`` of the connection) never leaves a cube locked; the critical section
commits its writes on other connections, so no transaction stays open while
the conflict model is asked. Named locks are not replicated: every worker must
use the same primary server (in a Galera cluster, the same node).

Within a worker, holders of one cube queue on an in-process lock first, so a
worker waits for a cube with at most one database connection. The embedded
SQLite mode runs one worker: the in-process lock is the whole lock there.

The wait is bounded: :class:`CubeLockTimeout` after ``timeout_s`` (the
processor requeues the run on the retry topic). Nothing is ever written
without the lock: :meth:`HeldCube.confirm`, called before each provider write,
raises :class:`CubeLockLost` when the connection holding it has gone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.memory.cube_locks import CubeLockLost, CubeLockTimeout, KeyedLocks
from streams.memory.model import CubeKey

log = logging.getLogger(__name__)
NAME_PREFIX = "memstream.cube."
_ACQUIRE = text("SELECT GET_LOCK(:name, :timeout)")
_MINE = text("SELECT IS_USED_LOCK(:name) = CONNECTION_ID()")
_RELEASE = text("SELECT RELEASE_LOCK(:name)")


def lock_name(namespace: str, key: CubeKey) -> str:
    """The server-wide name of ``key``'s lock in the database ``namespace`` (MySQL
    allows 64 characters, so the identity is hashed)."""
    ident = json.dumps([namespace, key.tenant_id, key.cube, key.owner])
    return NAME_PREFIX + hashlib.sha256(ident.encode("utf-8")).hexdigest()[:40]


class HeldNamedLock:
    """A held cube lock (``streams.memory.cube_locks.HeldCube``); :meth:`confirm` before writing."""

    def __init__(self, key: CubeKey, name: str | None = None,
                 conn: AsyncConnection | None = None) -> None:
        self.key = key
        self.name = name
        self._conn = conn

    async def confirm(self) -> None:
        """Raise :class:`CubeLockLost` unless the lock is still this holder's."""
        if self._conn is None:
            return
        try:
            mine = (await self._conn.execute(_MINE, {"name": self.name})).scalar()
            await self._conn.commit()
        except DBAPIError as exc:
            raise CubeLockLost(f"the connection holding the lock of {self.key} failed: "
                               f"{exc.orig!r}") from exc
        if mine != 1:
            raise CubeLockLost(f"the lock of {self.key} is no longer held by this worker")


class NamedCubeLocks:
    """``streams.memory.cube_locks.CubeLocks`` of one worker: an in-process lock per cube,
    and with ``engine`` given the database's named lock too."""

    def __init__(self, *, timeout_s: float, engine: AsyncEngine | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self.engine = engine
        self.namespace = (engine.url.database or "") if engine is not None else ""
        self.clock = clock
        self._local = KeyedLocks()

    @asynccontextmanager
    async def hold(self, key: CubeKey) -> AsyncIterator[HeldNamedLock]:
        """Hold ``key``'s lock for the block; :class:`CubeLockTimeout` after waiting
        ``timeout_s`` in all."""
        deadline = self.clock() + self.timeout_s
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self._local.hold(repr(key), self.timeout_s))
            except TimeoutError:
                raise CubeLockTimeout(f"waited {self.timeout_s:g}s for the lock of {key} "
                                      "in this worker") from None
            if self.engine is None:
                yield HeldNamedLock(key)
                return
            name = lock_name(self.namespace, key)
            conn = await stack.enter_async_context(self.engine.connect())
            await self._acquire(conn, key, name, max(0.0, deadline - self.clock()))
            try:
                yield HeldNamedLock(key, name, conn)
            finally:
                await self._release(conn, key, name)

    async def _acquire(self, conn: AsyncConnection, key: CubeKey, name: str,
                       wait_s: float) -> None:
        try:
            got = (await conn.execute(_ACQUIRE, {"name": name, "timeout": wait_s})).scalar()
            await conn.commit()
        except BaseException:
            # cancelled or failed mid-wait: the server may grant the lock to this
            # connection still, so the connection is closed, never pooled again
            await _discard(conn)
            raise
        if got == 1:
            return
        if got == 0:
            raise CubeLockTimeout(f"waited {self.timeout_s:g}s for the lock of {key}")
        raise CubeLockLost(f"the wait for the lock of {key} was interrupted")

    @staticmethod
    async def _release(conn: AsyncConnection, key: CubeKey, name: str) -> None:
        """Release, or close the connection (which releases it) when that fails."""
        if conn.invalidated:  # lost: the server ended its session, and the lock with it
            return
        try:
            await conn.execute(_RELEASE, {"name": name})
            await conn.commit()
        except BaseException as exc:
            await _discard(conn)
            if not isinstance(exc, Exception):
                raise
            log.warning("releasing the lock of %s failed (%s: %s); its connection was closed",
                        key, type(exc).__name__, exc)


async def _discard(conn: AsyncConnection) -> None:
    try:
        await asyncio.shield(conn.invalidate())
    except Exception as exc:  # the connection is gone either way
        log.debug("closing a lock connection: %s", exc)
