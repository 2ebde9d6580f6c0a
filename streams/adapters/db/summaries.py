"""SummaryRows: a conversation's stored summary and the messages it is made from.

Implements the ``Summaries`` port of :mod:`streams.consolidation.ports`: what a
due summary reads is read on one connection (one snapshot), and a summary is
stored under a locking read of the messages it summarised (stored only when every
one is still there) and then of the current summary, never moving
``covered_until_id`` backwards (a stale retry cannot replace a newer summary). On
MySQL/MariaDB the store runs at READ COMMITTED: locking reads take no gap locks,
so the first summaries of many conversations stored at once do not deadlock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import upsert
from streams.adapters.db.schema.conversation import conversation_message, conversation_summary
from streams.clock import aware_utc, naive_utc
from streams.consolidation.model import SessionMessage, SummaryInput, SummaryStored

_m, _s = conversation_message.c, conversation_summary.c


class SummaryRows:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._upsert = upsert(engine, conversation_summary, ["tenant_id", "conversation_id"],
                              ["summary", "covered_until_id", "covered_count", "token_count",
                               "updated_at"])

    async def due(self, tenant_id: str, conversation_id: str, *, due: Callable[[int], bool],
                  newest: int) -> SummaryInput | None:
        conv = (_m.tenant_id == tenant_id, _m.conversation_id == conversation_id)
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(_s.summary, _s.covered_until_id).where(
                _s.tenant_id == tenant_id, _s.conversation_id == conversation_id))).first()
            covered = int(row.covered_until_id) if row else 0
            uncovered = int((await conn.execute(
                select(func.count()).where(*conv, _m.id > covered))).scalar_one())
            if not due(uncovered):
                return None
            rows = (await conn.execute(
                select(_m.id, _m.event_id, _m.role, _m.name, _m.content, _m.created_at)
                .where(*conv).order_by(_m.id.desc()).limit(newest))).all()
            messages = [SessionMessage(int(r.id), r.event_id, r.role, r.content,
                                       aware_utc(r.created_at), r.name)
                        for r in reversed(rows)]
            until = messages[-1].id
            total = int((await conn.execute(
                select(func.count()).where(*conv, _m.id <= until))).scalar_one())
        return SummaryInput(row.summary if row else None, covered, messages, until, total)

    async def store(self, tenant_id: str, conversation_id: str, text: str, *, until: int,
                    total: int, tokens: int, now: datetime) -> SummaryStored:
        doc: dict[str, Any] = {
            "tenant_id": tenant_id, "conversation_id": conversation_id, "summary": text,
            "covered_until_id": until, "covered_count": total,
            "token_count": tokens, "updated_at": naive_utc(now)}
        conv = (_m.tenant_id == tenant_id, _m.conversation_id == conversation_id)
        async with self.engine.connect() as conn:
            if conn.dialect.name in ("mysql", "mariadb"):
                # no gap locks: the first summaries of two conversations, each read
                # "for update" while missing and then inserted, deadlock under them
                await conn.execution_options(isolation_level="READ COMMITTED")
            async with conn.begin():
                # the messages summarised first: that lock orders two stores of one
                # conversation (the first message is in both), and a summary is not
                # stored when one of them is gone (erased while it was made)
                still = (await conn.execute(
                    select(func.count()).select_from(conversation_message)
                    .where(*conv, _m.id <= until).with_for_update())).scalar_one()
                if int(still) != total:
                    return "changed"
                current = (await conn.execute(select(_s.covered_until_id).where(
                    _s.tenant_id == tenant_id, _s.conversation_id == conversation_id)
                    .with_for_update())).scalar_one_or_none()
                if current is not None and int(current) >= until:
                    return "stale"
                await conn.execute(self._upsert, doc)
        return "stored"

    async def kept(self, tenant_id: str, conversation_id: str) -> bool:
        async with self.engine.connect() as conn:
            return (await conn.execute(select(_s.covered_until_id).where(
                _s.tenant_id == tenant_id, _s.conversation_id == conversation_id))).first() \
                is not None
