"""The stats SQL: overview, memory distribution, top agents, one cube.

Each function takes an open connection and the tenant, and every statement
filters on ``tenant_id`` first, so it reads only that tenant's range of one of
the indexes in :mod:`streams.adapters.db.schema.stats` (or the tables' own).

``conversation_message.tenant_id`` has the database's default collation, which
on MySQL ignores case; :func:`tenant_is` adds a byte-exact comparison there so
tenant ``acme`` never counts rows of tenant ``ACME`` (the index still serves
the range). The memory tables compare tenants byte for byte already.

The ``memory`` table holds the built-in (MySQL) provider's memories; MemOS
and Mem0 keep theirs in their own stores, so memory counts cover the built-in
provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, and_, case, distinct, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from streams.adapters.db.schema.consolidation import consolidation_progress
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.memory import memory
from streams.adapters.db.schema.stats import memory_search_log
from streams.stats.buckets import iso

CONTENT_PREVIEW_CHARS = 200
_msg, _mem, _log = conversation_message.c, memory.c, memory_search_log.c


def tenant_is(conn: AsyncConnection, column: ColumnElement[str],
              tenant: str) -> ColumnElement[bool]:
    """``column = tenant``, byte for byte on MySQL too."""
    cond = column == tenant
    if conn.dialect.name == "mysql":
        return and_(cond, column.collate("utf8mb4_bin") == tenant)
    return cond


def _int(value: Any) -> int:
    return int(value or 0)


def _time(value: datetime | None) -> str | None:
    return iso(value) if value is not None else None


def _valid() -> ColumnElement[int]:
    return func.sum(case((_mem.valid_to.is_(None), 1), else_=0), type_=Integer)


def _expired() -> ColumnElement[int]:
    return func.sum(case((_mem.valid_to.is_not(None), 1), else_=0), type_=Integer)


async def overview(conn: AsyncConnection, tenant: str) -> dict[str, Any]:
    t = tenant_is(conn, _msg.tenant_id, tenant)
    messages, conversations = (await conn.execute(
        select(func.count(), func.count(distinct(_msg.conversation_id))).where(t))).one()
    first, last = (await conn.execute(
        select(func.min(_msg.created_at), func.max(_msg.created_at)).where(t))).one()
    agents = (await conn.execute(
        select(func.count(distinct(_msg.agent_id))).where(t))).scalar_one()

    # a conversation is closed when a session end claimed its newest message: the
    # newest message's session (messages stamped with it), or the newest message
    # by id (messages stored before they were stamped)
    newest = (select(_msg.conversation_id.label("conversation_id"),
                     func.max(_msg.id).label("newest_id"),
                     func.max(_msg.session_seq).label("newest_seq"))
              .where(t).group_by(_msg.conversation_id).subquery())
    p = consolidation_progress.c
    claimed = or_(p.claimed_until_id >= newest.c.newest_id,
                  and_(newest.c.newest_seq.is_not(None),
                       p.claimed_session_seq >= newest.c.newest_seq))
    closed = (await conn.execute(
        select(func.sum(case((claimed, 1), else_=0), type_=Integer))
        .select_from(newest.outerjoin(consolidation_progress, and_(
            p.tenant_id == tenant, p.conversation_id == newest.c.conversation_id))))).scalar()

    mt = _mem.tenant_id == tenant
    total, valid, expired = (await conn.execute(
        select(func.count(), _valid(), _expired()).where(mt))).one()

    lt = _log.tenant_id == tenant
    failed = func.sum(case((_log.outcome != "ok", 1), else_=0), type_=Integer)
    providers = (await conn.execute(
        select(_log.provider, func.count(), failed, func.avg(_log.latency_ms))
        .where(lt).group_by(_log.provider).order_by(_log.provider))).all()
    return {
        "tenant": tenant,
        "messages": _int(messages),
        "conversations": _int(conversations),
        "agents": _int(agents),
        "first_message_at": _time(first),
        "last_message_at": _time(last),
        "sessions_open": _int(conversations) - _int(closed),
        "sessions_closed": _int(closed),
        "memories": _int(total),
        "memories_valid": _int(valid),
        "memories_expired": _int(expired),
        "searches": sum(_int(r[1]) for r in providers),
        "searches_failed": sum(_int(r[2]) for r in providers),
        "providers": [
            {"provider": r[0], "searches": _int(r[1]), "failed": _int(r[2]),
             "avg_latency_ms": round(float(r[3]), 3) if r[3] is not None else None}
            for r in providers
        ],
    }


MEMORY_GROUPS = {"type": _mem.type, "scope": _mem.scope, "kind": _mem.kind, "cube": _mem.cube}


async def memory_distribution(conn: AsyncConnection, tenant: str, by: str, limit: int,
                              offset: int) -> dict[str, Any]:
    key = MEMORY_GROUPS[by]
    mt = _mem.tenant_id == tenant
    total = (await conn.execute(select(func.count(distinct(key))).where(mt))).scalar_one()
    count = func.count().label("memories")
    rows = (await conn.execute(
        select(key, count, _valid(), _expired()).where(mt).group_by(key)
        .order_by(count.desc(), key).limit(limit).offset(offset))).all()
    return {
        "tenant": tenant,
        "by": by,
        "items": [{"key": r[0], "memories": _int(r[1]), "valid": _int(r[2]),
                   "expired": _int(r[3])} for r in rows],
        **page(limit, offset, _int(total)),
    }


def page(limit: int, offset: int, total: int) -> dict[str, Any]:
    """The paging fields of a list answer."""
    return {"limit": limit, "offset": offset, "total": total,
            "next_offset": offset + limit if offset + limit < total else None}


async def top_agents(conn: AsyncConnection, tenant: str, by: str, limit: int,
                     offset: int) -> dict[str, Any]:
    """Agents ranked by messages or by memories (ties by agent id), a page at a time."""
    t = tenant_is(conn, _msg.tenant_id, tenant)
    mt = _mem.tenant_id == tenant
    n_msg, n_mem = func.count().label("n"), func.count().label("n")
    by_messages = (select(_msg.agent_id, n_msg, func.max(_msg.created_at))
                   .where(t).group_by(_msg.agent_id))
    by_memories = select(_mem.agent_id, n_mem, _valid()).where(mt).group_by(_mem.agent_id)
    if by == "messages":
        total = (await conn.execute(
            select(func.count(distinct(_msg.agent_id))).where(t))).scalar_one()
        ranked = (await conn.execute(
            by_messages.order_by(n_msg.desc(), _msg.agent_id).limit(limit).offset(offset))).all()
        agents = [r[0] for r in ranked]
        others = (await conn.execute(by_memories.where(_mem.agent_id.in_(agents)))).all()
        msgs = {r[0]: (r[1], r[2]) for r in ranked}
        mems = {r[0]: (r[1], r[2]) for r in others}
    else:
        total = (await conn.execute(
            select(func.count(distinct(_mem.agent_id))).where(mt))).scalar_one()
        ranked = (await conn.execute(
            by_memories.order_by(n_mem.desc(), _mem.agent_id).limit(limit).offset(offset))).all()
        agents = [r[0] for r in ranked]
        others = (await conn.execute(by_messages.where(_msg.agent_id.in_(agents)))).all()
        mems = {r[0]: (r[1], r[2]) for r in ranked}
        msgs = {r[0]: (r[1], r[2]) for r in others}
    items = []
    for agent in agents:
        m_count, m_last = msgs.get(agent, (0, None))
        k_count, k_valid = mems.get(agent, (0, 0))
        items.append({"agent_id": agent, "messages": _int(m_count),
                      "last_message_at": _time(m_last), "memories": _int(k_count),
                      "memories_valid": _int(k_valid)})
    return {"tenant": tenant, "by": by, "items": items,
            **page(limit, offset, _int(total))}


def _memory_item(r: Any) -> dict[str, Any]:
    content = r.content if len(r.content) <= CONTENT_PREVIEW_CHARS else (
        r.content[:CONTENT_PREVIEW_CHARS - 1] + "…")
    return {
        "id": str(r.id), "type": r.type, "scope": r.scope, "kind": r.kind,
        "user_id": r.user_id, "agent_id": r.agent_id, "importance": float(r.importance),
        "content": content, "created_at": iso(r.created_at), "event_time": _time(r.event_time),
        "valid_to": _time(r.valid_to), "superseded_by": r.superseded_by,
    }


async def cube_detail(conn: AsyncConnection, tenant: str, cube: str, user: str | None,
                      limit: int, offset: int) -> dict[str, Any]:
    """One cube: counts by type (valid, expired, superseded) and its newest memories."""
    where: Sequence[ColumnElement[bool]] = [_mem.tenant_id == tenant, _mem.cube == cube]
    if user is not None:
        where = [*where, _mem.user_id == user]
    superseded = func.sum(case((_mem.superseded_by.is_not(None), 1), else_=0), type_=Integer)
    by_type = (await conn.execute(
        select(_mem.type, func.count(), _valid(), _expired(), superseded).where(*where)
        .group_by(_mem.type).order_by(_mem.type))).all()
    newest = (await conn.execute(
        select(_mem.id, _mem.type, _mem.scope, _mem.kind, _mem.user_id, _mem.agent_id,
               _mem.importance, _mem.content, _mem.created_at, _mem.event_time, _mem.valid_to,
               _mem.superseded_by)
        .where(*where).order_by(_mem.created_at.desc(), _mem.id.desc())
        .limit(limit).offset(offset))).all()
    total = sum(_int(r[1]) for r in by_type)
    return {
        "tenant": tenant,
        "cube": cube,
        "user": user,
        "memories": total,
        "valid": sum(_int(r[2]) for r in by_type),
        "expired": sum(_int(r[3]) for r in by_type),
        "superseded": sum(_int(r[4]) for r in by_type),
        "by_type": [{"type": r[0], "memories": _int(r[1]), "valid": _int(r[2]),
                     "expired": _int(r[3]), "superseded": _int(r[4])} for r in by_type],
        "items": [_memory_item(r) for r in newest],
        **page(limit, offset, total),
    }
