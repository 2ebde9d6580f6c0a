"""A statement read on the driver's connection, on MariaDB: the rows SQLAlchemy reads,
for any keys (exact comparison: case, trailing spaces, any Unicode), and statements
needing a conversion refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import JSON, Column, Integer, MetaData, Table, bindparam, func, select
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.driver_read import DriverRead
from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema.memory import memory_scope_stats
from streams.memory.provider import Scope
from streams.memory.providers.builtin.search import _stats_params, _stats_query, _versions_query
from tests.support.services import create_database, drop_database, unique

# keys as tenants write them: any text MySQL's utf8mb4 holds (no NUL, no lone surrogate)
KEYS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               min_size=1, max_size=12)


@pytest.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    database = unique("ms_drv_")
    e = create_async_engine(create_database(database))
    try:
        await upgrade(e)
        yield e
    finally:
        await e.dispose()
        drop_database(database)


async def put_scopes(e: AsyncEngine, rows: list[tuple[str, str, str, int]]) -> None:
    async with e.begin() as conn:
        await conn.execute(memory_scope_stats.delete())
        for tenant, cube, owner, version in rows:
            await conn.execute(memory_scope_stats.insert().values(
                tenant_id=tenant, cube=cube, owner_id=owner, version=version,
                updated_at=datetime.now(UTC).replace(tzinfo=None)))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored=st.lists(st.tuples(KEYS, KEYS, KEYS), min_size=1, max_size=6, unique=True),
       asked=st.lists(st.tuples(KEYS, KEYS), min_size=1, max_size=3, unique=True),
       tenant=KEYS, pick=st.integers(0, 5))
async def test_a_driver_read_gives_the_rows_sqlalchemy_gives(
        engine: AsyncEngine, stored: list[tuple[str, str, str]],
        asked: list[tuple[str, str]], tenant: str, pick: int) -> None:
    """Versions of scopes asked by keys near the stored ones (one asked exactly, the
    others random): the same rows as the statement executed by SQLAlchemy."""
    await put_scopes(engine, [(t, c, o, i + 1) for i, (t, c, o) in enumerate(stored)])
    t, c, o = stored[pick % len(stored)]
    pairs = {(c, o), *asked}
    for scope in (Scope(t, "u", "a"), Scope(tenant, "u", "a")):
        params = _stats_params(scope, pairs)
        statement = _versions_query(len(pairs))
        async with engine.connect() as conn:
            want = sorted(tuple(r) for r in await conn.execute(statement, params))
            read = DriverRead(statement, engine.dialect)
            got = await read.rows(conn, params)
        assert sorted(tuple(r) for r in got) == want
        assert all(r.version == int(r.version) and r.id == int(r.id) for r in got)


async def test_the_rows_are_named_as_the_statement_s_columns(engine: AsyncEngine) -> None:
    await put_scopes(engine, [("acme", "user_profile", "alice", 7)])
    params = _stats_params(Scope("acme", "alice", "helper"), {("user_profile", "alice")})
    async with engine.connect() as conn:
        read = DriverRead(_versions_query(1), engine.dialect)
        (row,) = await read.rows(conn, params)
        (whole,) = await DriverRead(_stats_query(1), engine.dialect).rows(conn, params)
    assert (row.version, row.id) == (7, whole.id)
    assert (whole.tenant_id, whole.cube, whole.owner_id) == ("acme", "user_profile", "alice")


async def test_a_statement_needing_a_conversion_is_refused(engine: AsyncEngine) -> None:
    async with engine.connect():  # the dialect has met its server
        pass
    docs = Table("docs", MetaData(), Column("id", Integer), Column("body", JSON))
    with pytest.raises(ValueError, match="body"):
        DriverRead(select(docs.c.body), engine.dialect)
    with pytest.raises(ValueError, match="when"):
        DriverRead(select(docs.c.id).where(docs.c.body == bindparam("when", type_=JSON)),
                   engine.dialect)
    DriverRead(select(docs.c.id, func.sleep(0).label("s")), engine.dialect)  # none needed
    ids = docs.c.id
    for late in (ids.in_([1, 2]), ids == bindparam("x", literal_execute=True),
                 ids == bindparam("c", callable_=lambda: 1)):
        with pytest.raises(ValueError, match=r"execution|callable"):
            DriverRead(select(ids).where(late), engine.dialect)


async def test_a_missing_parameter_is_refused_as_sqlalchemy_refuses_it(engine: AsyncEngine,
                                                                       ) -> None:
    async with engine.connect() as conn:
        read = DriverRead(_versions_query(1), engine.dialect)
        with pytest.raises(InvalidRequestError, match="owner0"):
            await read.rows(conn, {"tenant": "acme", "cube0": "user_profile"})


def test_only_aiomysql_is_read_on_the_driver() -> None:
    lite: Any = create_async_engine("sqlite+aiosqlite://")
    with pytest.raises(ValueError, match="aiomysql"):
        DriverRead(_versions_query(1), lite.dialect)
