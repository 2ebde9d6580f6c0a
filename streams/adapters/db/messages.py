"""MessageStore: the durable conversation history (MySQL is the truth; Redis only caches it).

Writes are idempotent on ``(tenant_id, event_id)``: storing an event that is
already there adds no row and changes no row, so a topic can be replayed from
offset 0; nor is an event an erasure remembered as deleted (``erased_event``)
stored again. Reads always carry the tenant.

Implements :class:`streams.ingest.ports.MessageRows` and
:class:`streams.ingest.ports.ClosedSessions` (what ingest writes) and
:class:`streams.session.ports.MessageLog` (what the Session read takes). The row a
message is stored as is :func:`streams.ingest.model.message_row`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, and_, func, or_, select, union_all
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import insert_ignoring_duplicates, upsert
from streams.adapters.db.schema.conversation import (
    conversation_message,
    conversation_session,
    conversation_summary,
)
from streams.adapters.db.schema.erasure import erased_event
from streams.clock import naive_utc, naive_utc_now
from streams.ingest.model import EventKey, MessageRow
from streams.ingest.model import message_row as message_row
from streams.ingest.model import row_to_doc as row_to_doc
from streams.session.model import ConversationSummary, MessageDoc


def _keys(t: Any, keys: Sequence[tuple[str, str]]) -> ColumnElement[bool]:
    """``(tenant_id, event_id)`` in ``keys``, as one range of the key's index per tenant."""
    by_tenant: dict[str, list[str]] = defaultdict(list)
    for tenant, event_id in keys:
        by_tenant[tenant].append(event_id)
    return or_(*(and_(t.tenant_id == tn, t.event_id.in_(ids)) for tn, ids in by_tenant.items()))


class MessageStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._insert = insert_ignoring_duplicates(
            engine, conversation_message, ["tenant_id", "event_id"]
        )
        self._remember = upsert(engine, conversation_session, ["tenant_id", "conversation_id"],
                                ["last_closed_seq", "updated_at"], never_lower=["last_closed_seq"])

    async def last_closed_sessions(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], int]:
        """For ``(tenant_id, conversation_id)`` pairs: the last closed session
        remembered when the conversation's state left the sessions table."""
        if not keys:
            return {}
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for tenant, conversation in keys:
            by_tenant[tenant].append(conversation)
        t = conversation_session.c
        cond = or_(*(and_(t.tenant_id == tn, t.conversation_id.in_(convs))
                     for tn, convs in by_tenant.items()))
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(t.tenant_id, t.conversation_id, t.last_closed_seq).where(cond))
            return {(r.tenant_id, r.conversation_id): int(r.last_closed_seq) for r in rows}

    async def remember_closed_sessions(
        self, marks: Mapping[tuple[str, str], int], now: datetime
    ) -> None:
        """Record each conversation's last closed session (before its state is
        dropped). A number below the one recorded never lowers it: a stale state
        cannot take back session numbers already used."""
        if not marks:
            return
        rows = [{"tenant_id": tenant, "conversation_id": conversation, "last_closed_seq": seq,
                 "updated_at": naive_utc(now)} for (tenant, conversation), seq in marks.items()]
        async with self.engine.begin() as conn:
            await conn.execute(self._remember, rows)

    async def existing(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which ``(tenant_id, event_id)`` pairs are already stored, or were erased
        (remembered in ``erased_event``): one statement, so an erasure deleting one
        of them meanwhile is seen either before (stored) or after (erased)."""
        if not keys:
            return set()
        stored, erased = conversation_message.c, erased_event.c
        q = union_all(select(stored.tenant_id, stored.event_id).where(_keys(stored, keys)),
                      select(erased.tenant_id, erased.event_id).where(_keys(erased, keys)))
        async with self.engine.connect() as conn:
            return {(r.tenant_id, r.event_id) for r in await conn.execute(q)}

    async def erased(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which ``(tenant_id, event_id)`` pairs an erasure deleted and remembered."""
        if not keys:
            return set()
        t = erased_event.c
        async with self.engine.connect() as conn:
            return {(r.tenant_id, r.event_id) for r in await conn.execute(
                select(t.tenant_id, t.event_id).where(_keys(t, keys)))}

    async def store(self, rows: Sequence[MessageRow]) -> set[EventKey]:
        """Insert the rows not stored yet (nor erased), in order, in one transaction.

        Returns the keys that were new. Raises the driver's error when the
        database is unreachable; nothing is committed then.
        """
        if not rows:
            return set()
        keys = [(r["tenant_id"], r["event_id"]) for r in rows]
        have = await self.existing(keys)
        fresh, seen = [], set(have)
        for r, k in zip(rows, keys, strict=True):
            if k not in seen:
                seen.add(k)
                fresh.append(r)
        if fresh:
            async with self.engine.begin() as conn:
                await conn.execute(self._insert, fresh)
        return {(r["tenant_id"], r["event_id"]) for r in fresh}

    async def probe(self) -> None:
        """Write a valid row in a transaction that is rolled back: raises what any
        write would raise now, and leaves nothing behind. Tells a database that
        refuses one row from one that refuses every row."""
        row = {
            "tenant_id": "memstream", "event_id": "memstream-write-probe",
            "conversation_id": "memstream-write-probe", "user_id": "memstream",
            "agent_id": "memstream", "role": "system", "name": None, "content": "",
            "tool_calls": None, "tool_call_id": None, "origin_conversation_id": None,
            "created_at": naive_utc_now(), "ingested_at": naive_utc_now(),
        }
        async with self.engine.connect() as conn:
            transaction = await conn.begin()
            try:
                await conn.execute(self._insert, [row])
            finally:
                await transaction.rollback()

    async def recent(self, tenant_id: str, conversation_id: str, limit: int) -> list[MessageDoc]:
        """The newest ``limit`` messages, oldest first."""
        t = conversation_message.c
        q = (
            select(conversation_message)
            .where(t.tenant_id == tenant_id, t.conversation_id == conversation_id)
            .order_by(t.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [row_to_doc(cast("Mapping[str, Any]", r._mapping)) for r in reversed(rows)]

    async def count(self, tenant_id: str, conversation_id: str) -> int:
        t = conversation_message.c
        q = select(func.count()).where(
            t.tenant_id == tenant_id, t.conversation_id == conversation_id
        )
        async with self.engine.connect() as conn:
            return int((await conn.execute(q)).scalar_one())

    async def summary(self, tenant_id: str, conversation_id: str) -> ConversationSummary | None:
        s = conversation_summary.c
        q = select(conversation_summary).where(
            s.tenant_id == tenant_id, s.conversation_id == conversation_id
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(q)).first()
        if row is None:
            return None
        return ConversationSummary(
            row.summary, row.covered_until_id, row.covered_count, row.token_count, row.updated_at
        )
