"""Erasure in the built-in provider: memories deleted for good.

Unlike an expiry (:mod:`.writes`), which keeps the row as history, an erasure
deletes the memory rows, their postings and vectors, and takes them out of the
scope statistics; a scope left with no memory loses its statistics row too.
A chunk at a time: the chunk's memories are found through the tenant's
indexes (by user and cube, or by id) with no lock held, then deleted scope by
scope, a transaction each, holding the scope's statistics row locked as a write
does, so a search or a write of the scope sees the scope before or after a
chunk, never half of it; under the lock only the chunk's own rows are read
(by primary key), never the rest of the scope. Each chunk bumps the scope's
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
        m, t, e = memory.c, memory_term.c, memory_embedding.c
        ids = select(m.id).where(m.tenant_id == tenant_id, where)
        async with self.engine.connect() as conn:
            def n(q: Any) -> Any:
                return conn.execute(select(func.count()).select_from(q.subquery()))
            counts = {
                "memory": (await n(ids)).scalar_one(),
                "memory_term": (await n(select(t.memory_id).where(t.memory_id.in_(ids)))
                                ).scalar_one(),
                "memory_embedding": (await n(select(e.memory_id).where(e.memory_id.in_(ids)))
                                     ).scalar_one(),
            }
            matching: dict[int, int] = {int(s): int(k) for s, k in (await conn.execute(
                select(m.scope_id, func.count()).where(m.tenant_id == tenant_id, where)
                .group_by(m.scope_id))).all()}
            if matching:
                held: dict[int, int] = {int(s): int(k) for s, k in (await conn.execute(
                    select(m.scope_id, func.count()).where(m.scope_id.in_(list(matching)))
                    .group_by(m.scope_id))).all()}
                # a scope whose every memory goes loses its statistics row
                counts["memory_scope_stats"] = len([s for s, k in matching.items()
                                                    if held.get(s) == k])
        return {k: int(v) for k, v in counts.items() if v}

    async def erase(self, tenant_id: str, where: ColumnElement[bool],
                    record: Record | None = None,
                    stop: Callable[[], bool] | None = None) -> dict[str, int]:
        """Delete the memories of ``tenant_id`` matching ``where`` (expired ones too);
        the counts per table. A chunk of them is found through the tenant's indexes
        (no lock held), then deleted scope by scope, each under its statistics row's
        lock, in a transaction that reads only the chunk's own rows. ``record`` adds
        each transaction's counts in it; ``stop`` is asked after each chunk (True: the
        rest stays for the next call)."""
        m = memory.c
        totals: Counter[str] = Counter()
        unmoved: set[int] = set()  # found last time, and not deleted
        while True:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(select(m.id, m.scope_id).where(
                    m.tenant_id == tenant_id, where).limit(self.chunk))).all()
            if not rows or {int(r.id) for r in rows} == unmoved:
                return dict(totals)  # (found again and still not matching under the lock)
            by_scope: dict[int, list[int]] = {}
            for r in rows:
                by_scope.setdefault(int(r.scope_id), []).append(int(r.id))
            gone = 0
            for scope_id, ids in sorted(by_scope.items()):
                async with self.engine.begin() as conn:
                    counts = await self._chunk(conn, scope_id, tenant_id, where, ids)
                    if record is not None and counts:
                        await record(conn, counts)
                totals.update(counts)
                gone += counts.get("memory", 0)
            if len(rows) < self.chunk and gone:
                return dict(totals)
            unmoved = set() if gone else {int(r.id) for r in rows}
            if stop is not None and stop():
                return dict(totals)

    async def _chunk(self, conn: AsyncConnection, scope_id: int, tenant_id: str,
                     where: ColumnElement[bool], ids: list[int]) -> dict[str, int]:
        """``ids`` of one scope that still match, with their postings and vectors, under
        the scope's lock; the scope's statistics follow."""
        m, s, t, e = memory.c, memory_scope_stats.c, memory_term.c, memory_embedding.c
        await conn.execute(select(s.id).where(s.id == scope_id).with_for_update())
        rows = (await conn.execute(select(m.id, m.doc_len, m.valid_to).where(
            m.id.in_(ids), m.scope_id == scope_id, m.tenant_id == tenant_id, where))).all()
        ids = [int(r.id) for r in rows]
        if not ids:
            return {}
        counts = {
            "memory_term": (await conn.execute(memory_term.delete().where(
                t.memory_id.in_(ids)))).rowcount or 0,
            "memory_embedding": (await conn.execute(memory_embedding.delete().where(
                e.memory_id.in_(ids)))).rowcount or 0,
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
