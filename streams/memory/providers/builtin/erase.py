"""Erasure in the built-in provider: memories deleted for good.

Unlike an expiry (:mod:`.writes`), which keeps the row as history, an erasure
deletes the memory rows, their postings and vectors, and takes them out of the
scope statistics; a scope left with no memory loses its statistics row too.
Scope by scope, a chunk per transaction, holding the scope's statistics row
locked as a write does, so a search or a write of the scope sees the scope
before or after a chunk, never half of it. Each chunk bumps the scope's
version, so every worker's scope cache (:mod:`.scope_cache`) reloads the scope
at its next search.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.schema.memory import (
    memory,
    memory_embedding,
    memory_scope_stats,
    memory_term,
)
from streams.clock import naive_utc_now

CHUNK = 1000
Record = Callable[[AsyncConnection, dict[str, int]], Awaitable[None]]


class Eraser:
    def __init__(self, engine: AsyncEngine, *, chunk: int = CHUNK) -> None:
        self.engine = engine
        self.chunk = chunk

    async def count(self, tenant_id: str, where: ColumnElement[bool]) -> dict[str, int]:
        """What :meth:`erase` would delete, per table (a scope's statistics row when
        every memory of the scope matches)."""
        m, t, e, s = memory.c, memory_term.c, memory_embedding.c, memory_scope_stats.c
        ids = select(m.id).where(m.tenant_id == tenant_id, where)
        scopes = select(m.scope_id).where(m.tenant_id == tenant_id, where).distinct()
        kept = select(m.scope_id).where(m.scope_id.in_(scopes), ~m.id.in_(ids))
        async with self.engine.connect() as conn:
            def n(q: Any) -> Any:
                return conn.execute(select(func.count()).select_from(q.subquery()))
            counts = {
                "memory": (await n(ids)).scalar_one(),
                "memory_term": (await n(select(t.memory_id).where(t.memory_id.in_(ids)))
                                ).scalar_one(),
                "memory_embedding": (await n(select(e.memory_id).where(e.memory_id.in_(ids)))
                                     ).scalar_one(),
                "memory_scope_stats": (await n(select(s.id).where(
                    s.id.in_(scopes), ~s.id.in_(kept)))).scalar_one(),
            }
        return {k: int(v) for k, v in counts.items() if v}

    async def erase(self, tenant_id: str, where: ColumnElement[bool],
                    record: Record | None = None) -> dict[str, int]:
        """Delete the memories of ``tenant_id`` matching ``where`` (expired ones too);
        the counts per table. ``record`` adds each chunk's counts in its transaction."""
        m = memory.c
        totals: Counter[str] = Counter()
        while True:
            async with self.engine.connect() as conn:
                row = (await conn.execute(select(m.scope_id).where(
                    m.tenant_id == tenant_id, where).limit(1))).first()
            if row is None:
                return dict(totals)
            async with self.engine.begin() as conn:
                counts = await self._chunk(conn, int(row.scope_id), tenant_id, where)
                if record is not None:
                    await record(conn, counts)
            totals.update(counts)

    async def _chunk(self, conn: AsyncConnection, scope_id: int, tenant_id: str,
                     where: ColumnElement[bool]) -> dict[str, int]:
        m, s, t, e = memory.c, memory_scope_stats.c, memory_term.c, memory_embedding.c
        await conn.execute(select(s.id).where(s.id == scope_id).with_for_update())
        rows = (await conn.execute(select(m.id, m.doc_len, m.valid_to).where(
            m.scope_id == scope_id, m.tenant_id == tenant_id, where)
            .order_by(m.id).limit(self.chunk))).all()
        ids = [int(r.id) for r in rows]
        counts = {
            "memory_term": (await conn.execute(memory_term.delete().where(
                t.scope_id == scope_id, t.memory_id.in_(ids)))).rowcount or 0,
            "memory_embedding": (await conn.execute(memory_embedding.delete().where(
                e.scope_id == scope_id, e.memory_id.in_(ids)))).rowcount or 0,
            "memory": (await conn.execute(memory.delete().where(m.id.in_(ids)))).rowcount or 0,
        }
        live = [r for r in rows if r.valid_to is None]
        left = (await conn.execute(select(m.id).where(m.scope_id == scope_id).limit(1))).first()
        if left is None:
            counts["memory_scope_stats"] = (await conn.execute(memory_scope_stats.delete().where(
                s.id == scope_id))).rowcount or 0
        else:
            await conn.execute(update(memory_scope_stats).where(s.id == scope_id).values(
                doc_count=s.doc_count - len(live), version=s.version + 1,
                total_len=s.total_len - sum(int(r.doc_len) for r in live),
                updated_at=naive_utc_now()))
        return {k: int(v) for k, v in counts.items() if v}
