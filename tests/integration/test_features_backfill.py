"""``memstream db backfill``: memories written before their features were stored get
them, once, on MariaDB and SQLite; a newer release's value, another Python's, an
expired memory and a value already right are left; a value changed since it was read
is kept; a resumed or repeated run changes nothing more; a scope searched before and
after answers the same; a database without the schema is refused with what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema.memory import memory
from streams.memory.model import USER_CUBE, MemoryCandidate
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.builtin import backfill
from streams.memory.providers.builtin.backfill import BackfillProgress, backfill_features
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.providers.builtin.row_features import FEATURES_VERSION, decode, derive
from tests.support.services import create_database, drop_database, unique

ALICE = Scope("acme", "alice", "helper")
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    ("Alice: From now on, answer in Spanish.", "user"),
    ("Alice: We switched the deadline to 14 May, latency is now 250 ms.", "user"),
    ("Sure, here is the loader:\n```python\ndef load(path):\n    return open(path).read()\n"
     "```\n" + "It reads the file once. " * 40, "assistant"),
    ("我喜欢在周末去爬山，咖啡很好喝。", "user"),
    ("Alice keeps her bike in locker 12.", "user"),
    ("Alice moved the bike to locker 14.", "user"),
    ("Alice's favourite tea is genmaicha.", "user"),
    ("Alice prefers window seats.", "user"),
]


@pytest.fixture(params=["mariadb", "sqlite"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    database = None
    if request.param == "sqlite":
        address = f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}"
    else:
        database = unique("ms_backfill_")
        address = create_database(database)
    eng = create_async_engine(address)
    try:
        await upgrade(eng)
    finally:
        await eng.dispose()
    try:
        yield address
    finally:
        if database:
            drop_database(database)


async def written_before(engine: AsyncEngine) -> dict[int, object]:
    """Eight memories, then their stored features as older releases left them: none,
    a corrupt value, an older version, a newer version, two right ones, one of a newer
    Python's Unicode version; one memory expired. The features column by id."""
    ids = [int(i) for i in (await BuiltinProvider(engine).add(ALICE, USER_CUBE, [
        MemoryCandidate(content=c, source_event_ids=(f"e{n}",), event_time=T0, kind="episode",
                        role=role) for n, (c, role) in enumerate(TEXTS)])).ids]
    newer = json.dumps({"v": FEATURES_VERSION + 1, "anything": "a later release's"})
    older = json.dumps({"v": FEATURES_VERSION - 1, "s": None})
    other = json.dumps({"v": FEATURES_VERSION, "u": "99.0.0", "s": None})  # a newer Python's
    left = {ids[0]: None, ids[1]: "{not json", ids[2]: older, ids[3]: newer, ids[4]: None,
            ids[7]: other}
    m = memory.c
    async with engine.begin() as conn:
        for i, value in left.items():
            await conn.execute(update(memory).where(m.id == i).values(features=value))
        await conn.execute(update(memory).where(m.id == ids[4]).values(valid_to=T0))
    return await features(engine)


async def features(engine: AsyncEngine) -> dict[int, object]:
    m = memory.c
    async with engine.connect() as conn:
        return {int(r.id): r.features for r in await conn.execute(
            select(m.id, m.features).order_by(m.id))}


async def answers(engine: AsyncEngine) -> list[list[tuple[str, float]]]:
    return [[(m.id, round(m.score, 9)) for m in await BuiltinProvider(engine).search(
        ALICE, SearchRequest(q, [USER_CUBE], top_k=5))]
        for q in ("deadline latency", "loader file python", "周末爬山", "Spanish", "tea")]


async def test_memories_without_readable_features_get_them_once(url: str) -> None:
    engine = create_async_engine(url)
    try:
        before = await written_before(engine)
        ids = sorted(before)
        searched = await answers(engine)
        seen: list[tuple[int, int, int]] = []

        def progress(p: BackfillProgress) -> None:
            seen.append((p.checked, p.stored, p.last_id))

        done = await backfill_features(engine, batch=2, progress=progress)
        after = await features(engine)
        m = memory.c
        async with engine.connect() as conn:
            rows = {int(r.id): r for r in await conn.execute(select(memory))}
        for i in (ids[0], ids[1], ids[2]):  # none, corrupt, older: stored as derived
            assert decode(after[i]) == derive(rows[i].content, rows[i].role)
        assert after[ids[3]] == before[ids[3]]  # a newer release's: left
        assert after[ids[7]] == before[ids[7]]  # a newer Python's: left
        assert after[ids[4]] is None  # expired: never loaded, left
        assert after[ids[5]] == before[ids[5]] and after[ids[6]] == before[ids[6]]
        assert (done.checked, done.stored, done.left) == (7, 3, 2)
        assert done.last_id == done.max_id == ids[-1]
        assert [s[0] for s in seen] == [2, 4, 6, 7] and seen[-1][2] == ids[-1]
        assert await answers(engine) == searched  # the same answers from stored values
        again = await backfill_features(engine)
        assert (again.checked, again.stored, again.left) == (7, 0, 2)
        assert await features(engine) == after
        resumed = await backfill_features(engine, after=ids[2])
        assert resumed.checked == 4 and resumed.stored == 0
        async with engine.connect() as conn:
            assert (await conn.execute(select(m.id).where(m.id > ids[-1]))).first() is None
    finally:
        await engine.dispose()


async def test_the_command_stores_them_and_says_what_it_did(url: str) -> None:
    engine = create_async_engine(url)
    try:
        before = await written_before(engine)
    finally:
        await engine.dispose()
    env = {**os.environ, "MEMSTREAM_DATABASE__URL": url}
    run = subprocess.run([sys.executable, "-m", "streams.cli", "db", "backfill", "--batch", "3"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "7 valid memories checked" in run.stdout and "stored for 3, 2 left" in run.stdout
    last = run.stderr.rstrip("\n").split("\r")[-1]  # the line as it was left
    top = max(before)
    assert f"] {top}/{top} ids; 7 memories checked, 3 stored" in last, run.stderr
    engine = create_async_engine(url)
    try:
        after = await features(engine)
    finally:
        await engine.dispose()
    assert sum(after[i] != before[i] for i in before) == 3
    for batch in ("0", "10001"):
        bad = subprocess.run([sys.executable, "-m", "streams.cli", "db", "backfill", "--batch",
                              batch], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode != 0 and "--batch must be 1 to 10000" in bad.stderr


async def test_a_value_changed_since_it_was_read_is_kept(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A value another writer stores between the batch's read and its update stays
    (on MariaDB too, whose default collation would take one differing only in case for
    the value read); the count says what was stored."""
    engine = create_async_engine(url)
    try:
        before = await written_before(engine)
        ids = sorted(before)
        changed = json.dumps({"V": FEATURES_VERSION - 1, "S": None})  # the old one, in capitals
        real = backfill._values

        def meanwhile(rows: Any) -> Any:
            out = real(rows)
            sync = create_engine(url.replace("+aiosqlite", "").replace("+aiomysql", "+pymysql"))
            with sync.begin() as conn:
                conn.execute(update(memory).where(memory.c.id == ids[2]).values(features=changed))
            sync.dispose()
            return out

        monkeypatch.setattr(backfill, "_values", meanwhile)
        done = await backfill_features(engine, batch=100)
        after = await features(engine)
    finally:
        await engine.dispose()
    assert after[ids[2]] == changed and done.stored == 2


def test_a_database_without_the_schema_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, "MEMSTREAM_DATABASE__URL": f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"}
    run = subprocess.run([sys.executable, "-m", "streams.cli", "db", "backfill"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "memstream db upgrade" in run.stderr, run.stderr
