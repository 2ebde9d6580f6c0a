"""A database failure as the erasure stage sees it: :class:`~streams.stores.StoreUnavailable`.

The erasure waits out any failure of the database (every step is idempotent, so
trying again is safe): :func:`unavailable_on_db_errors` turns every error raised
through SQLAlchemy into that one port-level error, the driver's kept as its cause.
Stores other stages read classify the driver's errors themselves
(:mod:`streams.adapters.db.errors`) and are not wrapped.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any, ParamSpec, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from streams.memory.cube_locks import CubeLocks, HeldCube
from streams.memory.model import CubeKey
from streams.stores import StoreUnavailable

P = ParamSpec("P")
T = TypeVar("T")


@contextmanager
def db_unavailable() -> Iterator[None]:
    """Raise :class:`StoreUnavailable` for any SQLAlchemy error raised in the block."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc


def unavailable_on_db_errors(
        call: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """``call`` raising :class:`StoreUnavailable` instead of a SQLAlchemy error."""
    @functools.wraps(call)
    async def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        with db_unavailable():
            return await call(*args, **kwargs)
    return wrapped


class UnavailableCubeLocks:
    """:class:`~streams.memory.cube_locks.CubeLocks` whose database failures (taking
    the lock, or in the block it guards) raise :class:`StoreUnavailable`."""

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
