"""``memstream worker --no-migrate`` leaves the schema alone, on the real MariaDB:
against a missing or older schema it refuses to start (exit status 1, an error
naming the revisions) and has created no table and no topic; against a current
one it runs. Without the flag the worker migrates an empty database."""

from __future__ import annotations

import os
import subprocess

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text

from streams.adapters.db.migrate import (
    SchemaNotCurrentError,
    current_revision,
    migrations_dir,
    require_current,
    upgrade,
)
from tests.integration.conftest import Stack, chat_event, partitions
from tests.support.worker import MEMSTREAM, ROOT, WorkerProcess, eventually

pytestmark = pytest.mark.integration


def head_and_previous() -> tuple[str, str]:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    scripts = ScriptDirectory.from_config(cfg)
    head = scripts.get_revision(scripts.get_current_head())
    assert head is not None and isinstance(head.down_revision, str)
    return head.revision, head.down_revision


HEAD, PREVIOUS = head_and_previous()


def schema(stack: Stack) -> list[list[str]]:
    """Every column of the database, and the revision: what a start must not change."""
    cols = stack.sql("SELECT table_name, column_name, column_type, collation_name "
                     "FROM information_schema.columns WHERE table_schema = DATABASE() "
                     "ORDER BY table_name, ordinal_position")
    tables = {c[0] for c in cols}
    version = stack.sql("SELECT version_num FROM alembic_version") if tables else []
    return cols + version


def worker_no_migrate(stack: Stack) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMSTREAM, "worker", "--no-migrate"],
                          env={**os.environ, **stack.env()}, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


async def test_no_migrate_on_an_empty_database_refuses_to_start_and_creates_nothing(
        stack: Stack) -> None:
    r = worker_no_migrate(stack)
    assert r.returncode == 1, r.stderr[-3000:]
    assert r.stderr.strip() == (
        f"memstream: error: the database has no memstream schema (this version needs revision "
        f"{HEAD}); run `memstream db upgrade` first, or start the worker without --no-migrate")
    assert stack.sql("SHOW TABLES") == []
    assert await partitions(stack.topics["chat"]) == []  # refused before it touched Kafka


async def test_no_migrate_on_an_older_schema_refuses_to_start_and_leaves_it(
        stack: Stack) -> None:
    engine = stack.engine()
    try:
        await upgrade(engine, PREVIOUS)
    finally:
        await engine.dispose()
    before = schema(stack)
    r = worker_no_migrate(stack)
    assert r.returncode == 1, r.stderr[-3000:]
    assert (f"the database schema is at revision {PREVIOUS}, older than the revision {HEAD} "
            "this version needs; run `memstream db upgrade` first") in r.stderr
    assert schema(stack) == before
    assert before[-1] == [PREVIOUS]


def stored(stack: Stack) -> int:
    return int(stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0])


async def test_the_worker_migrates_an_empty_database_and_runs_with_no_migrate_on_it(
        stack: Stack) -> None:
    stack.worker().start()
    assert stack.sql("SELECT version_num FROM alembic_version") == [[HEAD]]
    stack.workers[0].stop()
    migrated = schema(stack)

    worker = WorkerProcess(stack.env(), stack.tmp / "no-migrate.log", args=["--no-migrate"])
    stack.workers.append(worker)
    worker.start()
    await stack.produce([chat_event(i, "c1") for i in range(3)])
    await eventually(lambda: stored(stack) == 3, 60, "the events stored")
    assert schema(stack) == migrated


@pytest.mark.parametrize(("state", "refused"), [
    ("empty", "no memstream schema"),
    ("previous", f"at revision {PREVIOUS}, older"),
    ("head", None),
    ("unknown", None),  # a newer release migrated it
])
async def test_require_current_checks_the_revision_and_changes_nothing(
        stack: Stack, state: str, refused: str | None) -> None:
    engine = stack.engine()
    try:
        if state != "empty":
            await upgrade(engine, PREVIOUS if state == "previous" else "head")
        if state == "unknown":
            async with engine.begin() as conn:
                await conn.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
        before = schema(stack)
        if refused is None:
            assert await require_current(engine) == await current_revision(engine)
        else:
            with pytest.raises(SchemaNotCurrentError, match=refused):
                await require_current(engine)
        assert schema(stack) == before
    finally:
        await engine.dispose()
