"""The erasure's stores sort a database error (issue 41, finding 4): an outage is
``StoreUnavailable`` (waited out), an error of the statement ``StoreRefused`` at
once (the erasure is blocked, the queue goes on), an unknown one is tried three
times and then blamed on the statement only when the database answers otherwise;
the message names the driver's class and number, never the statement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymysql.err as my
import pytest
from sqlalchemy import exc as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db import unavailable
from streams.adapters.db.unavailable import db_unavailable, unavailable_on_db_errors
from streams.stores import StoreRefused, StoreUnavailable

STATEMENT = "DELETE FROM conversation_message WHERE user_id = 'alice'"


def error(cls: type[sa.DBAPIError], orig: BaseException) -> sa.DBAPIError:
    return cls(STATEMENT, {}, orig)  # type: ignore[arg-type]


class Store:
    def __init__(self, engine: AsyncEngine, raises: BaseException) -> None:
        self.engine = engine
        self.raises = raises
        self.calls = 0

    @unavailable_on_db_errors
    async def delete(self) -> int:
        self.calls += 1
        raise self.raises


@pytest.fixture
async def engine(tmp_path: Path) -> Any:
    e = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'up.db'}")
    yield e
    await e.dispose()


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unavailable, "UNKNOWN_BACKOFF_S", 0.001)


async def test_a_constraint_is_refused_at_once(engine: AsyncEngine) -> None:
    store = Store(engine, error(sa.IntegrityError, my.IntegrityError(1451, "a foreign key")))
    with pytest.raises(StoreRefused) as refused:
        await store.delete()
    assert store.calls == 1
    assert "IntegrityError 1451 (row)" in str(refused.value)
    assert "alice" not in str(refused.value) and "DELETE" not in str(refused.value)


async def test_an_outage_is_unavailable_at_once(engine: AsyncEngine) -> None:
    store = Store(engine, error(sa.OperationalError, my.OperationalError(2013, "lost")))
    with pytest.raises(StoreUnavailable) as down:
        await store.delete()
    assert store.calls == 1 and "alice" not in str(down.value)


async def test_an_unknown_error_is_the_statements_when_the_database_answers(
        engine: AsyncEngine) -> None:
    store = Store(engine, error(sa.OperationalError, my.OperationalError(1644, "signal")))
    with pytest.raises(StoreRefused):
        await store.delete()
    assert store.calls == unavailable.UNKNOWN_ATTEMPTS


async def test_an_unknown_error_of_a_database_that_answers_nothing_is_waited_out(
        tmp_path: Path) -> None:
    dead = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    store = Store(dead, error(sa.OperationalError, my.OperationalError(1644, "signal")))
    with pytest.raises(StoreUnavailable):
        await store.delete()
    assert store.calls == unavailable.UNKNOWN_ATTEMPTS
    await dead.dispose()


def test_the_block_form_refuses_and_waits_the_same_way() -> None:
    with pytest.raises(StoreRefused), db_unavailable():
        raise error(sa.DataError, my.DataError(1406, "data too long"))
    with pytest.raises(StoreUnavailable), db_unavailable():
        raise error(sa.OperationalError, my.OperationalError(1205, "lock wait timeout"))
