"""EpisodeRows: the built-in provider's valid episodes, a page at a time, as the
episode retention weighs them.

Implements the ``EpisodeScan`` and ``CubeSizes`` ports of
:mod:`streams.consolidation.ports` (a cube's size: its statistics row). A page
is read on one connection with no lock held: the episodes (primary-key order,
``kind = 'episode'``, ``valid_to`` unset), then per scope of the page the count of
its valid episodes newer than the page's (an index range of the scope), the
messages of the page's source events (by ``(tenant_id, event_id)``, unique) and the
summaries of their conversations. An episode is *folded* when its message is
still stored and its conversation's summary covers it (``covered_until_id`` at or
past the message's id). Nothing is written here: the expiry goes through the
provider (:meth:`~streams.memory.providers.builtin.provider.BuiltinProvider.expire`),
which retires only rows still valid, so a page read before an erasure expires
nothing that erasure deleted.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from sqlalchemy import and_, func, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.schema.conversation import conversation_message, conversation_summary
from streams.adapters.db.schema.memory import memory, memory_scope_stats
from streams.clock import aware_utc
from streams.consolidation.rules.episode_retention import Episode, ranks

_mem, _msg, _sum = memory.c, conversation_message.c, conversation_summary.c


def first_event(source_event_ids: str) -> str | None:
    """The source event of an episode's row (its one message), or None when unreadable."""
    try:
        ids = json.loads(source_event_ids)
    except ValueError:
        return None
    return ids[0] if isinstance(ids, list) and ids and isinstance(ids[0], str) else None


class EpisodeRows:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def valid(self, tenant_id: str, cube: str, owner: str) -> int:
        """The cube's valid memories, from its statistics row (the ``CubeSizes`` port)."""
        s = memory_scope_stats.c
        async with self.engine.connect() as conn:
            n = (await conn.execute(select(s.doc_count).where(
                s.tenant_id == tenant_id, s.cube == cube, s.owner_id == owner))).scalar()
        return int(n or 0)

    async def page(self, after_id: int, limit: int) -> tuple[list[Episode], int | None]:
        q = (select(_mem.id, _mem.scope_id, _mem.tenant_id, _mem.user_id, _mem.agent_id,
                    _mem.cube, _mem.source_event_ids, _mem.event_time, _mem.created_at)
             .where(_mem.id > after_id, _mem.kind == "episode", _mem.valid_to.is_(None))
             .order_by(_mem.id).limit(limit))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
            if not rows:
                return [], None
            by_scope: dict[int, list[int]] = defaultdict(list)
            for r in rows:
                by_scope[int(r.scope_id)].append(int(r.id))
            rank = ranks(by_scope, await self._newer(conn, by_scope))
            events = {int(r.id): first_event(r.source_event_ids) for r in rows}
            covered = await self._covered(conn, {(r.tenant_id, e) for r in rows
                                                 if (e := events[int(r.id)]) is not None})
        episodes = [Episode(str(r.id), r.tenant_id, r.user_id, r.agent_id, r.cube,
                            aware_utc(r.event_time or r.created_at), rank[int(r.id)],
                            (r.tenant_id, events[int(r.id)]) in covered) for r in rows]
        return episodes, int(rows[-1].id) if len(rows) == limit else None

    @staticmethod
    async def _newer(conn: AsyncConnection, by_scope: dict[int, list[int]]) -> dict[int, int]:
        """Per scope, its valid episodes newer than every one of the page's."""
        out = {}
        for scope_id, ids in by_scope.items():
            out[scope_id] = int((await conn.execute(
                select(func.count()).where(_mem.scope_id == scope_id, _mem.id > max(ids),
                                           _mem.kind == "episode",
                                           _mem.valid_to.is_(None)))).scalar_one())
        return out

    @staticmethod
    async def _covered(conn: AsyncConnection,
                       events: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (tenant, event) pairs whose message a summary of its conversation covers."""
        if not events:
            return set()
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for tenant, event in events:
            by_tenant[tenant].append(event)
        messages: list[Any] = list((await conn.execute(
            select(_msg.tenant_id, _msg.event_id, _msg.conversation_id, _msg.id).where(or_(*(
                and_(_msg.tenant_id == t, _msg.event_id.in_(evs))
                for t, evs in by_tenant.items()))))).all())
        if not messages:
            return set()
        convs = {(m.tenant_id, m.conversation_id) for m in messages}
        until = {(s.tenant_id, s.conversation_id): int(s.covered_until_id)
                 for s in (await conn.execute(
                     select(_sum.tenant_id, _sum.conversation_id, _sum.covered_until_id).where(
                         tuple_(_sum.tenant_id, _sum.conversation_id).in_(list(convs))))).all()}
        return {(m.tenant_id, m.event_id) for m in messages
                if until.get((m.tenant_id, m.conversation_id), 0) >= int(m.id)}
