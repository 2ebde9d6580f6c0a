"""A database failure as the erasure stage sees it: :class:`~streams.stores.StoreUnavailable`
(wait it out) or :class:`~streams.stores.StoreRefused` (no attempt can mend it).

Every step of an erasure is idempotent, so trying again is safe; but only an
outage passes by waiting. :func:`unavailable_on_db_errors` sorts each error raised
through SQLAlchemy with :func:`~streams.adapters.db.errors.classify_db_error`:

* ``transient`` (a connection lost, a deadlock, a lock wait timeout, a server
  shutting down or read-only, a table not migrated yet): ``StoreUnavailable``,
  which the erasure retries until it passes, as before;
* ``row`` (a constraint, a value the column cannot hold, a packet too large):
  ``StoreRefused`` at once — the same statement will always get it, and the
  erasure fails with that error (``blocked``) instead of holding up every erasure
  queued behind it;
* ``unknown``: the call is tried again :data:`UNKNOWN_ATTEMPTS` times in all;
  an error still there is ``StoreRefused`` when the database answers a probe
  (it takes other statements: this one is to blame) and ``StoreUnavailable``
  otherwise — the rule :mod:`streams.adapters.db.isolation` follows for rows.

The message says the driver's error class and number only (no SQL, no values:
an erasure's statements name the person erased); the driver's error is kept as
the cause. Stores other stages read classify the driver's errors themselves and
are not wrapped.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.errors import DbError, DbErrorKind, classify_db_error
from streams.memory.cube_locks import CubeLocks, HeldCube
from streams.memory.model import CubeKey
from streams.stores import StoreRefused, StoreUnavailable

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger(__name__)

UNKNOWN_ATTEMPTS = 3
UNKNOWN_BACKOFF_S = 0.2  # doubling between the attempts


def unavailable(exc: SQLAlchemyError, error: DbError) -> StoreUnavailable:
    return StoreUnavailable(f"{error.describe()}: {type(exc).__name__}")


def refused(error: DbError) -> StoreRefused:
    return StoreRefused(f"the database refused a statement of the erasure: {error.describe()}")


@contextmanager
def db_unavailable() -> Iterator[None]:
    """Raise :class:`StoreRefused` for a SQLAlchemy error no attempt can mend (a
    ``row`` error), :class:`StoreUnavailable` for any other one raised in the block."""
    try:
        yield
    except SQLAlchemyError as exc:
        error = classify_db_error(exc)
        if error.kind is DbErrorKind.ROW:
            raise refused(error) from exc
        raise unavailable(exc, error) from exc


async def _answers(engine: AsyncEngine) -> bool:
    """Whether the database runs a statement now."""
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError, TimeoutError):
        return False
    return True


def unavailable_on_db_errors(
        call: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """A method of a store with an ``engine``, raising :class:`StoreUnavailable` or
    :class:`StoreRefused` instead of a SQLAlchemy error (see the module docstring)."""
    @functools.wraps(call)
    async def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await call(*args, **kwargs)
            except SQLAlchemyError as exc:
                error = classify_db_error(exc)
                if error.kind is DbErrorKind.TRANSIENT:
                    raise unavailable(exc, error) from exc
                if error.kind is DbErrorKind.ROW:
                    raise refused(error) from exc
                if attempt < UNKNOWN_ATTEMPTS:
                    log.warning("%s: %s, trying again", call.__qualname__, error.describe())
                    await asyncio.sleep(UNKNOWN_BACKOFF_S * 2 ** (attempt - 1))
                    continue
                engine = getattr(args[0], "engine", None) if args else None
                if isinstance(engine, AsyncEngine) and await _answers(engine):
                    raise refused(error) from exc
                raise unavailable(exc, error) from exc
    return wrapped


class UnavailableCubeLocks:
    """:class:`~streams.memory.cube_locks.CubeLocks` whose database failures (taking
    the lock, or in the block it guards) raise :class:`StoreUnavailable` (or
    :class:`StoreRefused`, see :func:`db_unavailable`)."""

    def __init__(self, locks: CubeLocks) -> None:
        self.locks = locks
        self.timeout_s = locks.timeout_s

    def hold(self, key: CubeKey) -> AbstractAsyncContextManager[HeldCube]:
        return self._hold(key)

    @asynccontextmanager
    async def _hold(self, key: CubeKey) -> AsyncIterator[HeldCube]:
        with db_unavailable():
            async with self.locks.hold(key) as held:
                yield held
