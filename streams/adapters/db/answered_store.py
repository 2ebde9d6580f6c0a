"""AnsweredStore: the durable record of answered queries (``answered_request``).

One row per request key (a digest of the reply topic and the correlation id,
:func:`streams.query.answered.request_key`), written once the broker
acknowledged the reply; rows older than any caller waits are purged.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import insert_ignoring_duplicates
from streams.adapters.db.schema.conversation import answered_request
from streams.clock import naive_utc


class AnsweredStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._insert = insert_ignoring_duplicates(engine, answered_request, ["request_key"])

    async def add(self, keys: Sequence[str], now: datetime) -> None:
        if not keys:
            return
        at = naive_utc(now)
        async with self.engine.begin() as conn:
            await conn.execute(self._insert, [{"request_key": k, "answered_at": at}
                                              for k in dict.fromkeys(keys)])

    async def exists(self, key: str) -> bool:
        c = answered_request.c
        async with self.engine.connect() as conn:
            row = (await conn.execute(
                select(c.request_key).where(c.request_key == key))).first()
        return row is not None

    async def purge(self, before: datetime) -> int:
        async with self.engine.begin() as conn:
            result = await conn.execute(delete(answered_request).where(
                answered_request.c.answered_at < naive_utc(before)))
        return int(result.rowcount or 0)
