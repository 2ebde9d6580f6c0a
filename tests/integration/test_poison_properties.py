"""Poison through the real IngestProcessor and the real MessageStore on MariaDB
(fakes for the cache, the publisher and the sessions table): whatever a batch
holds, processing returns, every record is stored or dead-lettered exactly once
(or is a session end), and its good batch-mates are stored."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import create_engine
from streams.adapters.db.messages import MessageStore
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.stale_marks import StaleMarkStore
from streams.ingest.rules.subagent import Disposition, disposition
from streams.session.stale import StaleHistories
from streams.settings import DatabaseSettings
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable
from streams.wire.decode import Rejected, decode_chat_event
from streams.wire.envelope import SourceRecord
from streams.wire.headers import header
from streams.wire.records import ChatMessage, SessionEnd
from tests.support.poison import ID, poison_records, valid_events
from tests.support.services import drop_database, migrated_database, unique
from tests.support.wiring import ingest_processor, settings_for_tests

SETTINGS = settings_for_tests(ingest={"retry_initial_s": 0.05, "retry_max_s": 0.2})
EXAMPLES = max(10, settings.default.max_examples // 2)


@pytest.fixture(scope="module")
def db() -> Iterator[tuple[asyncio.Runner, AsyncEngine]]:
    name = f"ms_{unique('prop')}"
    with asyncio.Runner() as runner:
        url = runner.run(migrated_database(name))
        engine = create_engine(DatabaseSettings(url=SecretStr(url)))
        try:
            yield runner, engine
        finally:
            runner.run(engine.dispose())
            drop_database(name)


def batch_of(goods: list[dict[str, Any]], poisons: list[bytes],
             order: list[int]) -> list[SourceRecord]:
    values = [json.dumps(g).replace(ID, f"good-{n}").encode() for n, g in enumerate(goods)]
    values += [p.replace(ID.encode(), f"poison-{n}".encode()) for n, p in enumerate(poisons)]
    key = b"c"
    return [SourceRecord("chat", 0, offset, key, values[i]) for offset, i in enumerate(order)]


async def stored_keys(engine: AsyncEngine) -> set[tuple[str, str]]:
    t = conversation_message.c
    async with engine.connect() as conn:
        return {(r.tenant_id, r.event_id) for r in await conn.execute(
            select(t.tenant_id, t.event_id))}


async def run_batch(engine: AsyncEngine, records: list[SourceRecord]) -> None:
    async with engine.begin() as conn:
        await conn.execute(delete(conversation_message))
    pub = RecordingPublisher()
    cache = InMemoryHotCopy()
    stale = StaleHistories(cache, StaleMarkStore(engine))
    proc = ingest_processor(MessageStore(engine), cache, pub, InMemorySessionTable(), stale=stale,
                            settings=SETTINGS)
    await asyncio.wait_for(proc.process(records), 60)  # it must return: nothing waits for ever
    stored = await stored_keys(engine)
    dead = [int(header(d.headers, "memstream.source.offset") or -1) for d in pub.on("dlq")]
    assert len(dead) == len(set(dead)), "a record was dead-lettered twice"
    for d in pub.on("dlq"):
        assert d.value == records[int(header(d.headers, "memstream.source.offset") or -1)].value
    rerouted = {int(header(r.headers, "memstream.origin.offset") or -1) for r in pub.on("sub")}
    for rec in records:
        decoded = decode_chat_event(rec.value, SETTINGS.ingest.max_content_bytes)
        if ahead(decoded):  # well-formed, but dated too far ahead of the clock: refused
            assert rec.offset in dead and rec.offset not in rerouted, rec.value
            continue
        outcomes = [rec.offset in dead, rec.offset in rerouted]
        if isinstance(decoded, ChatMessage) and disposition(decoded) is Disposition.KEEP:
            outcomes.append((decoded.tenant_id, decoded.event_id) in stored)
        elif not isinstance(decoded, Rejected):  # a session end or dropped sub-agent chat
            outcomes.append(True)
        assert outcomes.count(True) == 1, (rec.value, decoded, outcomes)
        if isinstance(decoded, Rejected):
            assert rec.offset in dead


def ahead(decoded: object) -> bool:
    """An event the ingest refuses for a date further ahead than MAX_FUTURE_S."""
    return (isinstance(decoded, ChatMessage | SessionEnd) and decoded.created_at.timestamp()
            > time.time() + SETTINGS.ingest.max_future_s)


@settings(max_examples=EXAMPLES)
@given(
    goods=st.lists(valid_events, min_size=1, max_size=4),
    poisons=st.lists(poison_records, min_size=1, max_size=4),
    data=st.data(),
)
def test_poison_never_stops_a_batch(db: tuple[asyncio.Runner, AsyncEngine],
                                    goods: list[dict[str, Any]], poisons: list[bytes],
                                    data: st.DataObject) -> None:
    runner, engine = db
    order = data.draw(st.permutations(range(len(goods) + len(poisons))))
    records = batch_of(goods, poisons, list(order))
    runner.run(run_batch(engine, records))
    # the good batch-mates are all stored (or, for session ends, applied)
    stored = runner.run(stored_keys(engine))
    for n, g in enumerate(goods):
        if g["type"] == "message" and not ahead(ChatMessage.model_validate(g)):
            assert ("t1", f"good-{n}") in stored
