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
it. A held connection may have broken since the last read (the server
restarted, the connection was idle too long): a read that finds it broken
is made once more on a new one. A read cancelled or failed halfway leaves the
connection unusable: it is discarded (closed in the background) and the next
read opens another. :meth:`close` closes it before the engine is disposed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Executable

from streams.memory.providers.builtin.rows import DbRow

log = logging.getLogger(__name__)


class HeldReads:
    def __init__(self, engine: AsyncEngine) -> None:
        """``engine``: this reader's own (see above), disposed by its owner after
        :meth:`close`."""
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._conn: AsyncConnection | None = None
        self._busy = False
        self._closed = False
        self._discarding: set[asyncio.Task[None]] = set()

    async def rows(self, statement: Executable,
                   params: Mapping[str, Any]) -> list[DbRow] | None:
        """The rows ``statement`` reads now; None when another read holds the
        connection (or it was closed): read them elsewhere."""
        if self._busy or self._closed:
            return None
        self._busy = True
        try:
            for retry in (True, False):
                opened = self._conn is None
                conn = self._conn = self._conn or await self._engine.connect()
                try:
                    return list((await conn.execute(statement, params)).all())
                except BaseException as exc:
                    self._discard()
                    if (opened or not retry or not isinstance(exc, DBAPIError)
                            or not exc.connection_invalidated):
                        raise
                    log.info("the held connection for scope reads broke (%s): reading "
                             "on a new one", type(exc.orig).__name__)
            raise AssertionError("unreachable")
        finally:
            self._busy = False
            if self._closed:
                self._discard()

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            task = asyncio.ensure_future(_invalidated(conn))
            self._discarding.add(task)
            task.add_done_callback(self._discarding.discard)

    async def close(self) -> None:
        """Close the connection (a read on it closes it when it ends)."""
        self._closed = True
        if not self._busy:
            self._discard()
        if self._discarding:
            await asyncio.gather(*self._discarding, return_exceptions=True)


async def _invalidated(conn: AsyncConnection) -> None:
    """Close a connection that may be halfway through a read: never reused."""
    with contextlib.suppress(SQLAlchemyError, OSError):
        await conn.invalidate()
    with contextlib.suppress(SQLAlchemyError, OSError):
        await conn.close()
