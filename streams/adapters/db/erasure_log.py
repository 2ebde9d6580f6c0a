"""ErasureLog: the durable record of erasures (tables in
:mod:`streams.adapters.db.schema.erasure`).

A record is written once per tenant and ``erasure_id`` (a repeated request finds
the first one) and never holds content: who, the cutoff, the chat-topic offsets,
the progress, the counts. The other tables refer to it by its ``seq``. Counts are
added inside the transaction that deleted what they count
(:meth:`ErasureLog.add_count`), so an erasure resumed after a crash reports each
row once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import Executable, delete, func, select, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.engine import insert_ignoring_duplicates, is_sqlite
from streams.adapters.db.schema.erasure import (
    ERROR_LEN,
    erasure,
    erasure_conversation,
    erasure_count,
    erasure_fence,
)
from streams.adapters.db.schema.memory import span_of
from streams.adapters.db.unavailable import unavailable_on_db_errors
from streams.clock import naive_utc
from streams.erasure.model import (
    EraseConversation,
    ErasureMark,
    ErasureRecord,
    MemorySource,
    Status,
    Target,
)

_e = erasure.c


def _mark(r: Row[tuple[object, ...]]) -> ErasureMark:
    source = None
    if r.memory_sources is not None:
        source = MemorySource(str(r.memory_cube), str(r.memory_user_id),
                              frozenset(json.loads(r.memory_sources)),
                              None if r.memory_kind is None else str(r.memory_kind),
                              span_of(r))
    return ErasureMark(str(r.erasure_id), str(r.tenant_id), r.target, str(r.subject),
                       r.cutoff, {int(p): int(o) for p, o in json.loads(r.chat_offsets).items()},
                       source, int(r.seq))


def _record(r: Row[tuple[object, ...]]) -> ErasureRecord:
    return ErasureRecord(_mark(r), r.status, r.reference, r.requested_at, r.finished_at,
                         r.error)


class TableErasureLog:
    """:class:`~streams.erasure.ports.ErasureLog` in the ``erasure`` tables. What the
    erasure's own steps call raises :class:`~streams.stores.StoreUnavailable` on a
    database failure; what the other stages call (the marks, a fence passing)
    raises the driver's error, which they classify."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._insert = insert_ignoring_duplicates(engine, erasure, ["tenant_id", "erasure_id"])
        self._fence = insert_ignoring_duplicates(engine, erasure_fence,
                                                 ["seq", "round", "partition"])
        self._conversation = insert_ignoring_duplicates(engine, erasure_conversation,
                                                        ["seq", "conversation_id"])

    @unavailable_on_db_errors
    async def record(self, *, erasure_id: str, tenant_id: str, target: Target, subject: str,
                     cutoff: datetime, chat_offsets: Mapping[int, int], now: datetime,
                     source: MemorySource | None = None,
                     reference: str | None = None) -> ErasureRecord:
        """Record the erasure, or find the one the tenant recorded under ``erasure_id``."""
        at = naive_utc(now)
        async with self.engine.begin() as conn:
            await conn.execute(self._insert, {
                "erasure_id": erasure_id, "tenant_id": tenant_id, "target": target,
                "subject": subject, "reference": reference, "cutoff": naive_utc(cutoff),
                "chat_offsets": json.dumps({str(p): o for p, o in sorted(chat_offsets.items())}),
                "memory_cube": source.cube if source else None,
                "memory_user_id": source.user_id if source else None,
                "memory_sources": json.dumps(sorted(source.event_ids)) if source else None,
                "memory_kind": source.kind if source else None,
                "span_start": source.span[0] if source and source.span else None,
                "span_end": source.span[1] if source and source.span else None,
                "status": "recorded", "requested_at": at, "updated_at": at})
            row = (await conn.execute(select(erasure).where(
                _e.tenant_id == tenant_id, _e.erasure_id == erasure_id))).one()
        return _record(row)

    @unavailable_on_db_errors
    async def get(self, tenant_id: str, erasure_id: str) -> ErasureRecord | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(erasure).where(
                _e.tenant_id == tenant_id, _e.erasure_id == erasure_id))).first()
        return _record(row) if row is not None else None

    async def marks_since(self, seq: int) -> list[ErasureMark]:
        """Every erasure recorded after ``seq``, oldest first."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(erasure).where(_e.seq > seq)
                                       .order_by(_e.seq))).all()
        return [_mark(r) for r in rows]

    async def last_done(self) -> int:
        """The highest ``seq`` of a finished erasure (0: none)."""
        async with self.engine.connect() as conn:
            value = (await conn.execute(select(func.max(_e.seq)).where(
                _e.status == "done"))).scalar()
        return int(value or 0)

    async def unfinished(self) -> list[ErasureRecord]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(erasure).where(_e.status != "done")
                                       .order_by(_e.seq))).all()
        return [_record(r) for r in rows]

    @unavailable_on_db_errors
    async def set_status(self, seq: int, status: Status, now: datetime,
                         error: str | None = None) -> None:
        at = naive_utc(now)
        async with self.engine.begin() as conn:
            await conn.execute(update(erasure).where(_e.seq == seq).values(
                status=status, updated_at=at, finished_at=at if status == "done" else None,
                error=error[:ERROR_LEN] if error else None))
            if status == "done":  # the conversation ids served their turn
                await conn.execute(delete(erasure_conversation).where(
                    erasure_conversation.c.seq == seq))

    @unavailable_on_db_errors
    async def plan(self, seq: int, conversations: Sequence[EraseConversation],
                   now: datetime | None = None) -> None:
        """Add the conversations the erasure touches (those known already stay); with
        ``now``, mark it planned."""
        async with self.engine.begin() as conn:
            rows = [{"seq": seq, "conversation_id": c.conversation_id, "whole": c.whole}
                    for c in conversations]
            for i in range(0, len(rows), 1000):
                await conn.execute(self._conversation, rows[i: i + 1000])
            if now is not None:
                await conn.execute(update(erasure).where(_e.seq == seq).values(
                    status="planned", updated_at=naive_utc(now), error=None))

    @unavailable_on_db_errors
    async def conversations(self, seq: int) -> list[EraseConversation]:
        c = erasure_conversation.c
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(c.conversation_id, c.whole).where(
                c.seq == seq).order_by(c.conversation_id))).all()
        return [EraseConversation(str(r.conversation_id), bool(r.whole)) for r in rows]

    async def pass_fence(self, seq: int, partition: int, tombstones: int,
                         now: datetime, round: int = 1) -> None:
        """Partition ``partition`` of the ingest stage passed the erasure's fence of
        ``round``, writing ``tombstones`` to the sessions table (counted once per
        partition and round)."""
        async with self.engine.begin() as conn:
            result = await conn.execute(self._fence, {
                "seq": seq, "round": round, "partition": partition,
                "passed_at": naive_utc(now)})
            if result.rowcount:
                await self.add_count(conn, seq, {"sessions_table": tombstones})

    @unavailable_on_db_errors
    async def fences(self, seq: int, round: int = 1) -> set[int]:
        f = erasure_fence.c
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(f.partition).where(f.seq == seq, f.round == round))
            return {int(r.partition) for r in rows}

    @unavailable_on_db_errors
    async def counts(self, seq: int) -> dict[str, int]:
        c = erasure_count.c
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(c.store, c["count"]).where(c.seq == seq))
            return {str(store): int(n) for store, n in rows if n}

    @unavailable_on_db_errors
    async def add_counts(self, seq: int, counts: Mapping[str, int]) -> None:
        """Add ``counts`` in a transaction of their own (copies deleted elsewhere)."""
        async with self.engine.begin() as conn:
            await self.add_count(conn, seq, counts)

    async def add_count(self, conn: AsyncConnection, seq: int,
                        counts: Mapping[str, int]) -> None:
        """Add ``counts`` inside the caller's transaction (the one that deleted them)."""
        rows = [{"seq": seq, "store": s, "count": n} for s, n in counts.items() if n]
        if not rows:
            return
        total = erasure_count.c["count"]
        stmt: Executable
        if is_sqlite(self.engine):
            s = sqlite.insert(erasure_count)
            stmt = s.on_conflict_do_update(index_elements=["seq", "store"],
                                           set_={"count": total + s.excluded["count"]})
        else:
            m = mysql.insert(erasure_count)
            stmt = m.on_duplicate_key_update({"count": total + m.inserted["count"]})
        await conn.execute(stmt, rows)
