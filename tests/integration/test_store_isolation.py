"""Batch isolation against the real MariaDB: rows the database (or its driver)
refuses for good are isolated and refused with their error, their batch-mates
stored; a refusal every row gets refuses nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import create_engine
from streams.adapters.db.errors import DbErrorKind
from streams.adapters.db.isolation import IsolatingWriter
from streams.adapters.db.messages import MessageStore, message_row
from streams.adapters.db.schema.conversation import conversation_message
from streams.backoff import retry_forever
from streams.settings import DatabaseSettings
from streams.wire.records import ChatMessage
from tests.support.services import drop_database, migrated_database, unique

T0 = datetime(2026, 11, 30, 8, tzinfo=UTC)


@pytest.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    name = f"ms_{unique('iso')}"
    url = await migrated_database(name)
    e = create_engine(DatabaseSettings(url=SecretStr(url)))
    yield e
    await e.dispose()
    drop_database(name)


def row(i: int, **changes: Any) -> dict[str, Any]:
    msg = ChatMessage(event_id=f"e{i}", type="message", tenant_id="t1", user_id="u1",
                      agent_id="a1", conversation_id="c1", role="user", content=f"message {i}",
                      created_at=T0)
    return message_row(msg, T0) | changes


async def stored(engine: AsyncEngine) -> list[str]:
    t = conversation_message.c
    async with engine.connect() as conn:
        return [r.event_id for r in await conn.execute(select(t.event_id).order_by(t.id))]


async def test_refused_rows_are_isolated_and_the_rest_stored_in_order(
    engine: AsyncEngine,
) -> None:
    store = MessageStore(engine)
    bad = {
        2: ("UnicodeEncodeError", None, {"content": "x\ud800"}),  # the driver cannot encode it
        5: ("DataError", 1406, {"tool_calls": '[{"a": "' + "x" * 70_000 + '"}]'}),
        6: ("DataError", 1406, {"name": "n" * 300}),
        9: ("IntegrityError", 1048, {"content": None}),
    }
    rows = [row(i, **bad[i][2]) if i in bad else row(i) for i in range(12)]
    writer = IsolatingWriter(store.store, rows, probe=store.probe)
    out = await writer.run()
    assert [(r.index, r.error.error_class, r.error.code) for r in out.rejected] == [
        (i, cls, code) for i, (cls, code, _) in sorted(bad.items())]
    assert all(r.error.kind is DbErrorKind.ROW for r in out.rejected)
    want = [f"e{i}" for i in range(12) if i not in bad]
    assert await stored(engine) == want
    assert out.stored == {("t1", e) for e in want}
    # the probes left nothing behind
    async with engine.connect() as conn:
        n = (await conn.execute(text(
            "SELECT COUNT(*) FROM conversation_message WHERE tenant_id = 'memstream'"))).scalar()
    assert n == 0


async def test_a_refusal_every_row_gets_refuses_nothing_and_waits(engine: AsyncEngine) -> None:
    store = MessageStore(engine)
    async with engine.begin() as conn:  # a constraint no row (not even the probe) meets
        await conn.execute(text("ALTER TABLE conversation_message "
                                "ADD CONSTRAINT only_x CHECK (tenant_id = 'x')"))
    rows = [row(i) for i in range(4)]
    writer = IsolatingWriter(store.store, rows, probe=store.probe, backoff_s=0.01)
    attempts = 0

    async def sleep(_: float) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 3:  # the operator drops the constraint
            async with engine.begin() as conn:
                await conn.execute(text(
                    "ALTER TABLE conversation_message DROP CONSTRAINT only_x"))

    out = await retry_forever(writer.run, what="mysql", initial_s=0.01, max_s=0.01, sleep=sleep)
    assert out.rejected == [] and attempts == 3
    assert await stored(engine) == ["e0", "e1", "e2", "e3"]
