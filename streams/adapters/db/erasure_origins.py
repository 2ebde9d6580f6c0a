"""Where the long-term memories an erasure removes are: ``memory_origin`` rows (every
memory consolidation wrote, in whichever provider) and, for one memory, the
built-in provider's own row.

An erasure deletes each provider's copies by these ids, then the origin rows
(:meth:`OriginRows.drop`, counted in the same transaction), so a resumed
erasure finds only what is left to do.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, and_, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.erasure_deletes import json_ids
from streams.adapters.db.schema.consolidation import (
    consolidation_candidate,
    consolidation_run,
    memory_origin,
)
from streams.adapters.db.schema.memory import memory, span_of
from streams.adapters.db.unavailable import unavailable_on_db_errors
from streams.erasure.model import BUILTIN, LocatedMemory, OriginRow, Selection
from streams.erasure.ports import RecordCounts
from streams.memory.model import decimal_id

_o = memory_origin.c


def origin_filter(sel: Selection) -> ColumnElement[bool]:
    t = sel.tenant_id
    if sel.target == "user":
        return and_(_o.tenant_id == t, _o.user_id == sel.subject)
    if sel.target == "conversation":
        return and_(_o.tenant_id == t, _o.conversation_id == sel.subject)
    if sel.target == "memory":
        return and_(_o.tenant_id == t, _o.memory_id == sel.subject)
    return _o.tenant_id == t


class OriginRows:
    """:class:`~streams.erasure.ports.Origins` in ``memory_origin`` (and the candidates
    consolidation judged); a database failure raises
    :class:`~streams.stores.StoreUnavailable`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @unavailable_on_db_errors
    async def of(self, sel: Selection, provider: str | None = None) -> list[OriginRow]:
        where = origin_filter(sel)
        if provider is not None:
            where = and_(where, _o.provider == provider)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(
                _o.provider, _o.memory_id, _o.cube, _o.user_id, _o.agent_id).where(where)
                .order_by(_o.provider, _o.cube, _o.user_id, _o.memory_id))).all()
        return [OriginRow(str(r.provider), str(r.memory_id), str(r.cube), str(r.user_id),
                          str(r.agent_id)) for r in rows]

    @unavailable_on_db_errors
    async def drop(self, tenant_id: str, provider: str, memory_ids: Sequence[str],
                   record: RecordCounts | None = None) -> int:
        """Delete the origin rows of ``memory_ids``; ``record`` hears how many in the
        same transaction, and for an external provider as its copies erased too (the
        built-in provider's rows are counted where they are deleted)."""
        async with self.engine.begin() as conn:
            n = int((await conn.execute(delete(memory_origin).where(
                _o.tenant_id == tenant_id, _o.provider == provider,
                _o.memory_id.in_(list(memory_ids))))).rowcount or 0)
            if n and record is not None:
                counts = {memory_origin.name: n}
                if provider != BUILTIN:
                    counts[provider] = n
                await record(conn, counts)
        return n

    @unavailable_on_db_errors
    async def judged_from(self, tenant_id: str, conversations: Sequence[str],
                          events: set[str]) -> list[OriginRow]:
        """The memories consolidated in ``conversations`` from any of ``events``."""
        c, r = consolidation_candidate.c, consolidation_run.c
        q = (select(r.provider, c.memory_id, c.source_event_ids)
             .join(consolidation_run, r.closed_id == c.closed_id)
             .where(r.tenant_id == tenant_id, r.conversation_id.in_(list(conversations)),
                    c.memory_id.is_not(None)))
        async with self.engine.connect() as conn:
            hits = {(str(row.provider), str(row.memory_id)) for row in await conn.execute(q)
                    if events & set(_event_ids(row.source_event_ids))}
            if not hits:
                return []
            rows = (await conn.execute(select(
                _o.provider, _o.memory_id, _o.cube, _o.user_id, _o.agent_id).where(
                _o.tenant_id == tenant_id,
                _o.memory_id.in_(sorted({m for _, m in hits}))))).all()
        return [OriginRow(str(x.provider), str(x.memory_id), str(x.cube), str(x.user_id),
                          str(x.agent_id)) for x in rows if (str(x.provider), str(x.memory_id))
                in hits]

    @unavailable_on_db_errors
    async def locate(self, tenant_id: str, memory_id: str,
                     provider: str | None) -> list[LocatedMemory]:
        """The memories ``memory_id`` may name in the tenant (one per provider holding
        that id): from ``memory_origin``, or else the built-in provider's row."""
        c = consolidation_candidate.c
        q = select(_o.provider, _o.cube, _o.user_id, _o.agent_id, _o.closed_id).where(
            _o.tenant_id == tenant_id, _o.memory_id == memory_id)
        if provider is not None:
            q = q.where(_o.provider == provider)
        found: list[LocatedMemory] = []
        async with self.engine.connect() as conn:
            for r in (await conn.execute(q)).all():
                cand = (await conn.execute(select(
                    c.source_event_ids, c.kind, c.span_start, c.span_end).where(
                    c.closed_id == r.closed_id, c.memory_id == memory_id))).first()
                found.append(LocatedMemory(
                    str(r.provider), memory_id, str(r.cube), str(r.user_id), str(r.agent_id),
                    _event_ids(cand.source_event_ids if cand else None),
                    str(cand.kind) if cand else None, span_of(cand) if cand else None))
            number = decimal_id(memory_id)
            if not found and provider in (None, BUILTIN) and number is not None:
                m = memory.c
                row = (await conn.execute(select(m.cube, m.user_id, m.agent_id,
                                                 m.source_event_ids, m.kind, m.span_start,
                                                 m.span_end).where(
                    m.tenant_id == tenant_id, m.id == number))).first()
                if row is not None:
                    found.append(LocatedMemory(BUILTIN, memory_id, str(row.cube),
                                               str(row.user_id), str(row.agent_id),
                                               _event_ids(row.source_event_ids),
                                               str(row.kind), span_of(row)))
        return found


def _event_ids(raw: object) -> tuple[str, ...]:
    return tuple(json_ids(raw))
