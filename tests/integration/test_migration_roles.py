"""Migration 0013 on a database of the release before: the episodes stored earlier get the
role of the message they were made from, so an assistant's old turns weigh as an
assistant's new passages do."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import create_engine
from streams.adapters.db.migrate import upgrade
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.memory import memory
from streams.settings import DatabaseSettings
from tests.support.services import create_database, drop_database

T = datetime(2026, 3, 1, 9)


@pytest.fixture(params=["mariadb", "sqlite"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"
        name = None
    else:
        name = f"mig_{uuid.uuid4().hex[:10]}"
        url = create_database(name)
    eng = create_engine(DatabaseSettings(url=SecretStr(url)))
    try:
        yield eng
    finally:
        await eng.dispose()
        if name:
            drop_database(name)


def episode(n: int, content: str, source: str) -> dict[str, object]:
    return {"scope_id": 1, "tenant_id": "t", "user_id": "u", "agent_id": "a",
            "cube": "user_profile", "type": "text", "scope": "user", "kind": "episode",
            "importance": 0.3, "content": content, "source_event_ids": f'["{source}"]',
            "session_key": "s", "seq": n, "doc_len": 3, "content_hash": f"h{n}",
            "event_time": T, "valid_from": T, "created_at": T, "updated_at": T}


async def test_earlier_episodes_get_their_messages_role(engine: AsyncEngine) -> None:
    await upgrade(engine, "0012")
    async with engine.begin() as conn:
        await conn.execute(conversation_message.insert(), [
            {"tenant_id": "t", "event_id": f"e{i}", "conversation_id": "c", "user_id": "u",
             "agent_id": "a", "role": role, "name": "Dana" if role == "user" else "Max",
             "content": "...", "created_at": T, "ingested_at": T}
            for i, role in enumerate(["user", "assistant"])])
        await conn.execute(memory.insert(), [
            episode(0, "Dana: I'm planning a trip.", "e0"),  # named: the message tells
            episode(1, "Max: Which dates?", "e1"),
            episode(2, "Assistant: Noted.", "gone-1"),  # its message purged since
            episode(3, "User: Thanks.", "gone-2"),
            episode(4, "Bob: Hi there.", "gone-3"),  # nothing tells: unknown
        ])
        fact = {**episode(5, "I'm vegetarian.", "e0"), "kind": "fact"}
        await conn.execute(memory.insert(), [fact])
    await upgrade(engine)
    async with engine.connect() as conn:
        rows = (await conn.execute(select(memory.c.content, memory.c.role, memory.c.span_start)
                                   .order_by(memory.c.seq))).all()
    assert [(r.content.split(":")[0], r.role) for r in rows] == [
        ("Dana", "user"), ("Max", "assistant"), ("Assistant", "assistant"), ("User", "user"),
        ("Bob", None), ("I'm vegetarian.", None)]
    assert all(r.span_start is None for r in rows)
