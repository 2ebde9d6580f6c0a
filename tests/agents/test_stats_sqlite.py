"""The stats API on the embedded SQLite: exact answers to a known load, the
documented shapes, and the search log store. (MariaDB: tests/integration/test_stats_api.py.)"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema import stats as stats_schema
from streams.stats.search_log import SearchLog, SearchLogWriter, SearchRecord
from streams.stats.service import StatsService
from tests.support import stats_api
from tests.support.stats_load import BAD_REQUESTS, CASES, load
from tests.support.worker import eventually


async def _template(path: Path, loaded: bool) -> None:
    eng = create_async_engine(f"sqlite+aiosqlite:///{path}")
    try:
        await upgrade(eng)
        if loaded:
            await load(eng)
    finally:
        await eng.dispose()


async def sqlite_threads_stopped() -> None:
    """Wait for aiosqlite's worker threads to stop. A failed connect stops its thread
    without waiting for it (aiosqlite's ``Connection.stop``); a thread that gets to it
    after the test's event loop closed raises ``Event loop is closed`` in the thread,
    reported against whichever test runs next."""
    await eventually(lambda: not any(t.is_alive() and t.name.endswith(
        "(_connection_worker_thread)") for t in threading.enumerate()),
        5.0, "aiosqlite's threads to stop", interval=0.01)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    """Migrated databases, empty and with the load, copied for each test."""
    d = tmp_path_factory.mktemp("stats-templates")
    out = {}
    for loaded in (False, True):
        out[loaded] = d / f"loaded-{loaded}.db"
        asyncio.run(_template(out[loaded], loaded))
    return out


def _engine(templates: dict[bool, Path], tmp: Path, loaded: bool) -> AsyncEngine:
    path = tmp / "stats.db"
    shutil.copy(templates[loaded], path)
    return create_async_engine(f"sqlite+aiosqlite:///{path}")


@pytest.fixture
async def engine(templates: dict[bool, Path], tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    eng = _engine(templates, tmp_path, loaded=False)
    try:
        yield eng
    finally:
        await eng.dispose()


@pytest.fixture
async def service(templates: dict[bool, Path], tmp_path: Path) -> AsyncIterator[StatsService]:
    eng = _engine(templates, tmp_path, loaded=True)

    async def get() -> AsyncEngine:
        return eng

    try:
        yield StatsService(get, max_limit=100, max_buckets=1000)
    finally:
        await eng.dispose()


def _case_id(case: tuple[Any, ...]) -> str:
    path, query, values = case[0], case[1], case[2]
    return path.format(**values) + "?" + "&".join(f"{k}={v}" for k, v in query.items())


async def test_the_migration_creates_what_stats_schema_declares(engine: AsyncEngine) -> None:
    mine = MetaData(naming_convention=stats_schema.metadata.naming_convention)
    log = stats_schema.memory_search_log.to_metadata(mine)
    assert {i.name for i in log.indexes} == {"ix_memory_search_log_tenant_id_created_at",
                                             "ix_memory_search_log_created_at",
                                             # an erasure's (migration 0014)
                                             "ix_memory_search_log_tenant_id_user_id"}

    def diff(conn: Any) -> list[Any]:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return [d for d in compare_metadata(ctx, mine)
                if not (d[0] == "remove_table" or (d[0] == "remove_index"
                                                  and d[1].table.name not in mine.tables))]

    def indexes(conn: Any) -> dict[str, list[str]]:
        from sqlalchemy import inspect
        insp = inspect(conn)
        return {i["name"]: i["column_names"] for t in ("memory", "conversation_message")
                for i in insp.get_indexes(t)}

    async with engine.connect() as conn:
        assert await conn.run_sync(diff) == []
        created = await conn.run_sync(indexes)
    for index in stats_schema.STATS_INDEXES:
        assert created.get(index.name) == [c.name for c in index.columns], index.name


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
async def test_answers_match_the_load(service: StatsService, case: tuple[Any, ...]) -> None:
    path, query, values, expected = case
    answer = await service.answer(path, {k: [v] for k, v in query.items()}, values)
    assert (answer.status, answer.body) == (200, expected)
    stats_api.check_answer(path, 200, answer.body)


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=[_case_id(c) for c in BAD_REQUESTS])
async def test_bad_parameters_are_rejected(service: StatsService, case: tuple[Any, ...]) -> None:
    path, query, values, status, code, parameter = case
    answer = await service.answer(path, {k: [v] for k, v in query.items()}, values)
    assert answer.status == status
    assert answer.body["error"]["code"] == code
    assert answer.body["error"]["parameter"] == parameter
    stats_api.check_answer(path, status, answer.body)


async def test_database_down_and_slow_queries_answer_5xx(tmp_path: Path) -> None:
    missing = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'x.db'}")

    async def unreachable() -> AsyncEngine:
        return missing

    down = await StatsService(unreachable).answer("/stats/overview", {"tenant": ["a"]})
    await missing.dispose()
    assert down.status == 503 and down.body["error"]["code"] == "database_unavailable"
    stats_api.check_answer("/stats/overview", 503, down.body)

    # the limit covers connecting and the queries; the pool holds a connection
    # already, so the limit runs out in the query (a connect cut short would
    # leave aiosqlite's thread to finish it after this test's loop is gone)
    slow_engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'slow.db'}")
    async with slow_engine.connect():
        pass

    async def sleepy() -> AsyncEngine:
        return slow_engine

    slow = StatsService(sleepy, timeout_s=0.05)

    async def hang(*args: Any) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {}

    endpoint = slow.endpoints["/stats/overview"]
    slow.endpoints["/stats/overview"] = type(endpoint)(
        endpoint.name, endpoint.path, endpoint.params, endpoint.schema, hang)
    timed_out = await slow.answer("/stats/overview", {"tenant": ["a"]})
    assert timed_out.status == 504 and timed_out.body["error"]["code"] == "timeout"
    stats_api.check_answer("/stats/overview", 504, timed_out.body)
    await slow_engine.dispose()
    await sqlite_threads_stopped()


async def test_search_log_record_batch_and_purge(engine: AsyncEngine) -> None:
    log = SearchLog(engine)
    now = datetime.now(UTC)
    await log.record(tenant_id="t", user_id="u" * 300, agent_id="a", latency_ms=12.5, results=2,
                     provider="a-provider-name-that-is-long", keyword_only=True,
                     created_at=now - timedelta(days=100))
    n = await log.record_many([
        SearchRecord("t", "u", "a", 3.0, 0, "mysql", outcome="timeout"),
        SearchRecord("t", "u", "a", 4.0, 1, "mysql", created_at=now.replace(tzinfo=None))])
    assert n == 2
    with pytest.raises(ValueError):
        await log.record(tenant_id="t" * 65, user_id="u", agent_id="a", latency_ms=1, results=0,
                         provider="mysql")
    t = stats_schema.memory_search_log
    async with engine.connect() as conn:
        rows = (await conn.execute(select(t).order_by(t.c.id))).all()
    assert [r.outcome for r in rows] == ["ok", "timeout", "ok"]
    assert len(rows[0].user_id) == 255 and rows[0].provider == "a-provider-name-"
    assert rows[0].keyword_only is True and rows[0].created_at.tzinfo is None
    assert await log.purge(now.replace(tzinfo=None) - timedelta(days=90), batch_size=1) == 1
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(t))).scalar_one() == 2


async def test_search_log_writer_batches_in_the_background(engine: AsyncEngine) -> None:
    log = SearchLog(engine)
    writer = SearchLogWriter(log, max_batch=3, flush_interval_s=0.05, max_pending=5)
    await writer.start()
    for i in range(3):
        assert writer.add(SearchRecord("t", "u", "a", float(i), i, "mysql"))
    # the query engine's SearchRecorder form
    writer.record_search(tenant_id="t", user_id="u", agent_id="a", provider=None,
                         keyword_only=True, latency_ms=2.5, results=0, outcome="timeout")
    assert not writer.add(SearchRecord("", "u", "a", 1.0, 0, "mysql"))  # no tenant
    t = stats_schema.memory_search_log

    async def count() -> int:
        async with engine.connect() as conn:
            return int((await conn.execute(select(func.count()).select_from(t))).scalar_one())

    for _ in range(100):
        if await count() == 4:
            break
        await asyncio.sleep(0.02)
    assert await count() == 4 and writer.pending == 0
    async with engine.connect() as conn:
        last = (await conn.execute(select(t).order_by(t.c.id.desc()).limit(1))).one()
    assert (last.provider, last.keyword_only, last.outcome) == ("none", True, "timeout")
    await writer.stop()

    # the database is down: records wait, the oldest beyond max_pending are dropped
    await engine.dispose()
    nowhere = create_async_engine("sqlite+aiosqlite:///" + str(Path("/nonexistent/dir/x.db")))
    broken = SearchLogWriter(SearchLog(nowhere), max_batch=2, max_pending=3)
    for i in range(5):
        broken.add(SearchRecord("t", "u", "a", float(i), i, "mysql"))
    assert broken.pending == 3 and broken.dropped == 2
    with pytest.raises(Exception):  # noqa: B017 - whatever the driver raises
        await broken.flush()
    assert broken.pending == 3  # nothing lost by the failed write
    await broken.stop()  # logs what it could not write
    await nowhere.dispose()
    await sqlite_threads_stopped()
