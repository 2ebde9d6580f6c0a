"""One database connection kept between searches for the read that opens each of
them: the statistics rows (versions) of the scopes searched.

A connection from the pool costs a checkout with a liveness ping, and a
rollback when it goes back: two more round trips and the pool's bookkeeping
around one short read. Held in autocommit, the connection reads each time the
latest committed rows, as a new transaction would, with none of that: about
0.6 ms of CPU and 0.8 ms of waiting less per search on a worker answering 20
requests a second (docs/benchmarks.md).

Its engine is one of its own, without a pool (:func:`~streams.adapters.db.engine.
create_engine` with ``pooled=False``): the connection kept takes no place in the
pool the rest of the worker shares. MySQL only: on SQLite there is no round trip
to save, and another engine of an in-memory database would be another database.
It serves one read at a time. A search that finds it busy is told so
(``None``) and reads on a pooled connection as before, so nobody waits for
it. A read that fails — the connection broke since the last one (the server
restarted, or closed it as idle), or no new one could be opened (the
server's connection limit) — is logged and answered ``None`` too: the search
reads on the pool, with its ping, and searches keep doing so for a few
seconds before the next connection is tried. A failed or cancelled read
leaves the connection unusable: it is discarded (closed in the background).
The connection is opened anew every 30 minutes, as the pool's are, so a
server switched over behind the same address is not read for long.
:meth:`close` closes it before the engine is disposed.

A statement that needs no conversion of its parameters or columns is compiled once
and read on the driver's connection (:mod:`streams.adapters.db.driver_read`): about
half a millisecond of CPU less per search than through SQLAlchemy's execution.
Any other is executed through SQLAlchemy as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Executable

from streams.adapters.db.driver_read import DRIVER_ERRORS, DriverRead
from streams.memory.providers.builtin.rows import DbRow

log = logging.getLogger(__name__)

RECYCLE_S = 1800.0  # as the pool's connections
PAUSE_S = 5.0
CLOSE_WAIT_S = 5.0
COMPILED_HELD = 16
FAILURES: tuple[type[Exception], ...] = (SQLAlchemyError, OSError, *DRIVER_ERRORS)


class HeldReads:
    def __init__(self, engine: AsyncEngine, *, recycle_s: float = RECYCLE_S,
                 pause_s: float = PAUSE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``engine``: this reader's own (see above), disposed by its owner after
        :meth:`close`. The connection is opened anew after ``recycle_s``; after a
        failure, searches read elsewhere for ``pause_s``."""
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.recycle_s = recycle_s
        self.pause_s = pause_s
        self.clock = clock
        self._conn: AsyncConnection | None = None
        self._opened = 0.0
        self._paused_until = float("-inf")
        self._busy = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self._discarding: set[asyncio.Task[None]] = set()
        self._compiled: dict[Select[Any], DriverRead | None] = {}

    async def rows(self, statement: Executable,
                   params: Mapping[str, Any]) -> list[DbRow] | None:
        """The rows ``statement`` reads now; None — read them elsewhere — when another
        read holds the connection, it was closed, or it failed (this one or one less
        than ``pause_s`` ago: logged, and the connection discarded)."""
        now = self.clock()
        if self._busy or self._closed or now < self._paused_until:
            return None
        self._busy = True
        self._idle.clear()
        try:
            if self._conn is not None and now - self._opened >= self.recycle_s:
                self._discard()  # a server switched over behind the same address is met
            if self._conn is None:
                self._conn, self._opened = await self._engine.connect(), now
                if self._closed:  # closed while connecting: not a read more on its engine
                    return None
            if (read := self._driver_read(statement)) is not None:
                return await read.rows(self._conn, params)
            return list((await self._conn.execute(statement, params)).all())
        except asyncio.CancelledError:
            self._discard()  # halfway through a read: never reused
            raise
        except FAILURES as exc:
            self._discard()
            self._paused_until = now + self.pause_s
            log.warning("the connection kept for scope reads failed (%s: %s): searches "
                        "read on the pool for %.0f s", type(exc).__name__, exc, self.pause_s)
            return None
        finally:
            self._busy = False
            self._idle.set()
            if self._closed:
                self._discard()

    def _driver_read(self, statement: Executable) -> DriverRead | None:
        """``statement`` compiled for the driver, once (None: read through SQLAlchemy).
        Only a few statements are kept: the reads of a search are a few built once."""
        if not isinstance(statement, Select):
            return None
        if statement not in self._compiled:
            if len(self._compiled) >= COMPILED_HELD:
                self._compiled.clear()
            try:
                self._compiled[statement] = DriverRead(statement, self._engine.dialect)
            except ValueError as exc:
                log.debug("scope reads of %s go through SQLAlchemy: %s", statement, exc)
                self._compiled[statement] = None
        return self._compiled[statement]

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            task = asyncio.ensure_future(_invalidated(conn))
            self._discarding.add(task)
            task.add_done_callback(self._discarding.discard)

    async def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Close the connection once a read on it has ended (waiting ``wait_s`` at most:
        then it is closed under the read, which fails); back when it is closed, so the
        engine may be disposed."""
        self._closed = True
        if self._busy:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), wait_s)
        self._discard()
        if self._discarding:
            await asyncio.gather(*self._discarding, return_exceptions=True)


async def _invalidated(conn: AsyncConnection) -> None:
    """Close a connection that may be halfway through a read: never reused."""
    with contextlib.suppress(SQLAlchemyError, OSError):
        await conn.invalidate()
    with contextlib.suppress(SQLAlchemyError, OSError):
        await conn.close()
