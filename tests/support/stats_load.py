"""A known load for the stats API and the exact answers it must give.

Three tenants: ``acme`` with most of the rows, ``ACME`` (the same ids, another
tenant: tenant ids compare byte for byte) and ``beta``. Rows go straight into
the tables through SQLAlchemy Core (MySQL or SQLite) and the search log store.
:data:`CASES` lists requests with their complete expected answers; the same
cases run against SQLite in-process and against a worker on MariaDB over HTTP.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema.consolidation import consolidation_progress
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.memory import memory
from streams.stats.search_log import SearchLog, SearchRecord


class _Any:
    def __eq__(self, other: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


# tenant, conversation, agent, user, first message, messages (one a minute)
CONVERSATIONS = [
    ("acme", "c1", "a1", "u1", "2026-11-30 08:00", 6),
    ("acme", "c2", "a1", "u1", "2026-11-30 09:10", 3),
    ("acme", "c3", "a2", "u2", "2026-11-29 23:50", 4),
    ("ACME", "c1", "a1", "u1", "2026-11-30 08:30", 2),
    ("beta", "c9", "b1", "u9", "2026-11-30 10:00", 2),
]
# claimed by a session end: the first n messages of the conversation
# claimed by message id up to the n-th message (before messages were stamped)
CLAIMED = {("acme", "c2"): 2}
# stamped with their session, claimed by session number: closed when the
# newest message's session is claimed
STAMPED = {("acme", "c1"): [1] * 6, ("acme", "c3"): [1, 1, 2, 2]}
CLAIMED_SESSIONS = {("acme", "c1"): 1, ("acme", "c3"): 1}


@dataclass(frozen=True)
class Mem:
    tenant: str
    name: str
    cube: str
    user: str
    agent: str
    type: str
    scope: str
    created: str
    kind: str = "fact"
    expired: bool = False
    superseded_by: str | None = None


MEMORIES = [
    Mem("acme", "m1", "user_profile", "u1", "a1", "text", "user", "2026-11-30 08:10"),
    Mem("acme", "m2", "user_profile", "u1", "a1", "text", "user", "2026-11-30 08:20"),
    Mem("acme", "m3", "user_profile", "u1", "a1", "preference", "user", "2026-11-30 09:15"),
    Mem("acme", "m4", "user_profile", "u1", "a1", "text", "user", "2026-11-30 08:05",
        expired=True, superseded_by="m2"),
    Mem("acme", "m5", "user_profile", "u2", "a2", "skill", "user", "2026-11-30 00:10"),
    Mem("acme", "m6", "agent_a1", "u1", "a1", "text", "agent", "2026-11-30 08:30"),
    Mem("acme", "m7", "agent_a1", "u1", "a1", "text", "agent", "2026-11-30 09:20"),
    Mem("acme", "m8", "agent_a1", "u1", "a1", "tool", "agent", "2026-11-30 08:40", expired=True),
    Mem("acme", "m9", "agent_a2", "u2", "a2", "text", "agent", "2026-11-30 00:20", kind="episode"),
    Mem("ACME", "n1", "user_profile", "u1", "a1", "text", "user", "2026-11-30 08:10"),
    Mem("beta", "b1", "agent_b1", "u9", "b1", "text", "agent", "2026-11-30 10:05"),
]


def _search(tenant: str, when: str, provider: str, results: int, latency: float,
            outcome: str = "ok", keyword_only: bool = False) -> SearchRecord:
    return SearchRecord(tenant_id=tenant, user_id="u1", agent_id="a1", latency_ms=latency,
                        results=results, provider=provider, keyword_only=keyword_only,
                        outcome=outcome, created_at=at(when))


SEARCHES = [
    _search("acme", "2026-11-30 08:05", "mysql", 3, 10),
    _search("acme", "2026-11-30 08:06", "mysql", 0, 20),
    _search("acme", "2026-11-30 08:07", "memos", 0, 100, outcome="error"),
    _search("acme", "2026-11-30 09:01", "mysql", 5, 5, keyword_only=True),
    _search("acme", "2026-11-30 09:02", "mysql", 1, 15),
    _search("ACME", "2026-11-30 08:30", "mysql", 2, 7),
    _search("beta", "2026-11-30 10:00", "mysql", 1, 9),
]


def content(m: Mem) -> str:
    return f"{m.tenant} memory {m.name}: " + "x" * (300 if m.name == "m3" else 10)


def _tag(tenant: str) -> str:
    return hashlib.sha256(tenant.encode()).hexdigest()[:8]


async def load(engine: AsyncEngine) -> None:
    """Write the whole load (into a migrated, empty database)."""
    msgs = []
    for tenant, conv, agent, user, first, n in CONVERSATIONS:
        for i in range(n):
            ts = at(first) + timedelta(minutes=i)
            msgs.append({
                # event ids differ beyond case: MySQL's default collation would
                # take "ACME-c1-0" for a duplicate of "acme-c1-0"
                "tenant_id": tenant, "event_id": f"{_tag(tenant)}-{conv}-{i}",
                "conversation_id": conv,
                "user_id": user, "agent_id": agent, "role": "user" if i % 2 == 0 else "assistant",
                "content": f"message {i}", "created_at": ts, "ingested_at": ts,
                "session_seq": STAMPED[(tenant, conv)][i] if (tenant, conv) in STAMPED else None,
            })
    mems = []
    for i, m in enumerate(MEMORIES):
        created = at(m.created)
        mems.append({
            "scope_id": 1000 + i, "tenant_id": m.tenant, "user_id": m.user, "agent_id": m.agent,
            "cube": m.cube, "type": m.type, "scope": m.scope, "kind": m.kind, "importance": 0.5,
            "content": content(m), "source_event_ids": "[]", "session_key": None, "seq": 0,
            "doc_len": 3, "content_hash": hashlib.sha256(m.name.encode()).hexdigest(),
            "event_time": created - timedelta(hours=1), "valid_from": created,
            "valid_to": created + timedelta(hours=1) if m.expired else None,
            "superseded_by": m.superseded_by, "created_at": created, "updated_at": created,
        })
    async with engine.begin() as conn:
        await conn.execute(insert(conversation_message), msgs)
        await conn.execute(insert(memory), mems)
        m = conversation_message.c
        for (tenant, conv), n in CLAIMED.items():
            ids = (await conn.execute(
                select(m.id).where(m.tenant_id == tenant, m.conversation_id == conv)
                .order_by(m.id))).scalars().all()
            await conn.execute(insert(consolidation_progress).values(
                tenant_id=tenant, conversation_id=conv, claimed_until_id=ids[n - 1],
                updated_at=at("2026-11-30 12:00")))
        for (tenant, conv), seq in CLAIMED_SESSIONS.items():
            await conn.execute(insert(consolidation_progress).values(
                tenant_id=tenant, conversation_id=conv, claimed_until_id=0,
                claimed_session_seq=seq, updated_at=at("2026-11-30 12:00")))
    await SearchLog(engine).record_many(SEARCHES)


def _page(limit: int, offset: int, total: int, next_offset: int | None) -> dict[str, Any]:
    return {"limit": limit, "offset": offset, "total": total, "next_offset": next_offset}


def _group(key: str, memories: int, valid: int, expired: int) -> dict[str, Any]:
    return {"key": key, "memories": memories, "valid": valid, "expired": expired}


def _trend(start: str, end: str, bucket: str, filled: dict[str, tuple[int, int, int]],
           tenant: str = "acme") -> dict[str, Any]:
    step = timedelta(hours=1) if bucket == "hour" else timedelta(days=1)
    first = at(start).replace(minute=0, second=0)
    if bucket == "day":
        first = first.replace(hour=0)
    items, ts = [], first
    while ts < at(end):
        key = ts.isoformat(timespec="seconds") + "Z"
        msgs, convs, mems = filled.get(key, (0, 0, 0))
        items.append({"bucket": key, "messages": msgs, "conversations": convs, "memories": mems})
        ts += step
    return {"tenant": tenant, "from": at(start).isoformat(timespec="seconds") + "Z",
            "to": at(end).isoformat(timespec="seconds") + "Z", "bucket": bucket,
            "messages": sum(i["messages"] for i in items),
            "memories": sum(i["memories"] for i in items), "items": items}


def _overview(tenant: str, **kw: Any) -> dict[str, Any]:
    zero = {"tenant": tenant, "messages": 0, "conversations": 0, "agents": 0,
            "first_message_at": None, "last_message_at": None, "sessions_open": 0,
            "sessions_closed": 0, "memories": 0, "memories_valid": 0, "memories_expired": 0,
            "searches": 0, "searches_failed": 0, "providers": []}
    return {**zero, **kw}


def _memory_item(name: str) -> dict[str, Any]:
    m = next(x for x in MEMORIES if x.name == name)
    text = content(m)
    created = at(m.created)
    return {
        "id": ANY, "type": m.type, "scope": m.scope, "kind": m.kind, "user_id": m.user,
        "agent_id": m.agent, "importance": 0.5,
        "content": text if len(text) <= 200 else text[:199] + "…",
        "created_at": created.isoformat() + "Z",
        "event_time": (created - timedelta(hours=1)).isoformat() + "Z",
        "valid_to": (created + timedelta(hours=1)).isoformat() + "Z" if m.expired else None,
        "superseded_by": m.superseded_by,
    }


def _search_bucket(key: str, searches: int = 0, hits: int = 0, empty: int = 0, failed: int = 0,
                   keyword_only: int = 0, results: int = 0, avg: float | None = None,
                   top: float | None = None) -> dict[str, Any]:
    return {"bucket": key, "searches": searches, "hits": hits, "empty": empty, "failed": failed,
            "keyword_only": keyword_only, "results": results, "avg_latency_ms": avg,
            "max_latency_ms": top}


# path, query, path values, expected answer (200)
CASES: list[tuple[str, dict[str, str], dict[str, str], dict[str, Any]]] = [
    ("/stats/overview", {"tenant": "acme"}, {}, _overview(
        "acme", messages=13, conversations=3, agents=2,
        first_message_at="2026-11-29T23:50:00Z", last_message_at="2026-11-30T09:12:00Z",
        sessions_open=2, sessions_closed=1, memories=9, memories_valid=7, memories_expired=2,
        searches=5, searches_failed=1, providers=[
            {"provider": "memos", "searches": 1, "failed": 1, "avg_latency_ms": 100.0},
            {"provider": "mysql", "searches": 4, "failed": 0, "avg_latency_ms": 12.5}])),
    ("/stats/overview", {"tenant": "ACME"}, {}, _overview(
        "ACME", messages=2, conversations=1, agents=1,
        first_message_at="2026-11-30T08:30:00Z", last_message_at="2026-11-30T08:31:00Z",
        sessions_open=1, memories=1, memories_valid=1, searches=1, providers=[
            {"provider": "mysql", "searches": 1, "failed": 0, "avg_latency_ms": 7.0}])),
    ("/stats/overview", {"tenant": "beta"}, {}, _overview(
        "beta", messages=2, conversations=1, agents=1,
        first_message_at="2026-11-30T10:00:00Z", last_message_at="2026-11-30T10:01:00Z",
        sessions_open=1, memories=1, memories_valid=1, searches=1, providers=[
            {"provider": "mysql", "searches": 1, "failed": 0, "avg_latency_ms": 9.0}])),
    ("/stats/overview", {"tenant": "nobody"}, {}, _overview("nobody")),
    ("/stats/memory-types", {"tenant": "acme"}, {}, {
        "tenant": "acme", "by": "type", **_page(50, 0, 4, None), "items": [
            _group("text", 6, 5, 1), _group("preference", 1, 1, 0), _group("skill", 1, 1, 0),
            _group("tool", 1, 0, 1)]}),
    ("/stats/memory-types", {"tenant": "acme", "by": "scope"}, {}, {
        "tenant": "acme", "by": "scope", **_page(50, 0, 2, None), "items": [
            _group("user", 5, 4, 1), _group("agent", 4, 3, 1)]}),
    ("/stats/memory-types", {"tenant": "acme", "by": "kind"}, {}, {
        "tenant": "acme", "by": "kind", **_page(50, 0, 2, None), "items": [
            _group("fact", 8, 6, 2), _group("episode", 1, 1, 0)]}),
    ("/stats/memory-types", {"tenant": "acme", "by": "cube", "limit": "2"}, {}, {
        "tenant": "acme", "by": "cube", **_page(2, 0, 3, 2), "items": [
            _group("user_profile", 5, 4, 1), _group("agent_a1", 3, 2, 1)]}),
    ("/stats/memory-types", {"tenant": "acme", "by": "cube", "limit": "2", "offset": "2"}, {}, {
        "tenant": "acme", "by": "cube", **_page(2, 2, 3, None), "items": [
            _group("agent_a2", 1, 1, 0)]}),
    ("/stats/memory-types", {"tenant": "beta"}, {}, {
        "tenant": "beta", "by": "type", **_page(50, 0, 1, None), "items": [
            _group("text", 1, 1, 0)]}),
    ("/stats/top-agents", {"tenant": "acme"}, {}, {
        "tenant": "acme", "by": "messages", **_page(10, 0, 2, None), "items": [
            {"agent_id": "a1", "messages": 9, "last_message_at": "2026-11-30T09:12:00Z",
             "memories": 7, "memories_valid": 5},
            {"agent_id": "a2", "messages": 4, "last_message_at": "2026-11-29T23:53:00Z",
             "memories": 2, "memories_valid": 2}]}),
    ("/stats/top-agents", {"tenant": "acme", "by": "memories", "limit": "1"}, {}, {
        "tenant": "acme", "by": "memories", **_page(1, 0, 2, 1), "items": [
            {"agent_id": "a1", "messages": 9, "last_message_at": "2026-11-30T09:12:00Z",
             "memories": 7, "memories_valid": 5}]}),
    ("/stats/top-agents", {"tenant": "acme", "by": "memories", "limit": "1", "offset": "1"}, {}, {
        "tenant": "acme", "by": "memories", **_page(1, 1, 2, None), "items": [
            {"agent_id": "a2", "messages": 4, "last_message_at": "2026-11-29T23:53:00Z",
             "memories": 2, "memories_valid": 2}]}),
    ("/stats/top-agents", {"tenant": "beta"}, {}, {
        "tenant": "beta", "by": "messages", **_page(10, 0, 1, None), "items": [
            {"agent_id": "b1", "messages": 2, "last_message_at": "2026-11-30T10:01:00Z",
             "memories": 1, "memories_valid": 1}]}),
    ("/stats/cubes/{cube_id}", {"tenant": "acme"}, {"cube_id": "user_profile"}, {
        "tenant": "acme", "cube": "user_profile", "user": None, "memories": 5, "valid": 4,
        "expired": 1, "superseded": 1, "by_type": [
            {"type": "preference", "memories": 1, "valid": 1, "expired": 0, "superseded": 0},
            {"type": "skill", "memories": 1, "valid": 1, "expired": 0, "superseded": 0},
            {"type": "text", "memories": 3, "valid": 2, "expired": 1, "superseded": 1}],
        "items": [_memory_item(n) for n in ("m3", "m2", "m1", "m4", "m5")],
        **_page(10, 0, 5, None)}),
    ("/stats/cubes/{cube_id}", {"tenant": "acme", "limit": "2", "offset": "1"},
     {"cube_id": "user_profile"}, {
        "tenant": "acme", "cube": "user_profile", "user": None, "memories": 5, "valid": 4,
        "expired": 1, "superseded": 1, "by_type": ANY,
        "items": [_memory_item(n) for n in ("m2", "m1")], **_page(2, 1, 5, 3)}),
    ("/stats/cubes/{cube_id}", {"tenant": "acme", "user": "u2"}, {"cube_id": "user_profile"}, {
        "tenant": "acme", "cube": "user_profile", "user": "u2", "memories": 1, "valid": 1,
        "expired": 0, "superseded": 0, "by_type": [
            {"type": "skill", "memories": 1, "valid": 1, "expired": 0, "superseded": 0}],
        "items": [_memory_item("m5")], **_page(10, 0, 1, None)}),
    ("/stats/cubes/{cube_id}", {"tenant": "acme"}, {"cube_id": "agent_a1"}, {
        "tenant": "acme", "cube": "agent_a1", "user": None, "memories": 3, "valid": 2,
        "expired": 1, "superseded": 0, "by_type": [
            {"type": "text", "memories": 2, "valid": 2, "expired": 0, "superseded": 0},
            {"type": "tool", "memories": 1, "valid": 0, "expired": 1, "superseded": 0}],
        "items": [_memory_item(n) for n in ("m7", "m8", "m6")], **_page(10, 0, 3, None)}),
    ("/stats/cubes/{cube_id}", {"tenant": "beta"}, {"cube_id": "agent_a1"}, {
        "tenant": "beta", "cube": "agent_a1", "user": None, "memories": 0, "valid": 0,
        "expired": 0, "superseded": 0, "by_type": [], "items": [], **_page(10, 0, 0, None)}),
    ("/stats/trends", {"tenant": "acme", "from": "2026-11-29T23:00:00Z",
                       "to": "2026-11-30T10:00:00Z", "bucket": "hour"}, {},
     _trend("2026-11-29 23:00", "2026-11-30 10:00", "hour", {
         "2026-11-29T23:00:00Z": (4, 1, 0), "2026-11-30T00:00:00Z": (0, 0, 2),
         "2026-11-30T08:00:00Z": (6, 1, 5), "2026-11-30T09:00:00Z": (3, 1, 2)})),
    ("/stats/trends", {"tenant": "acme", "from": "2026-11-29", "to": "2026-12-01"}, {},
     _trend("2026-11-29 00:00", "2026-12-01 00:00", "day", {
         "2026-11-29T00:00:00Z": (4, 1, 0), "2026-11-30T00:00:00Z": (9, 2, 9)})),
    # a partial first bucket counts only what is inside the range
    ("/stats/trends", {"tenant": "acme", "from": "2026-11-30T09:03:00+01:00",
                       "to": "2026-11-30T09:11:00Z", "bucket": "hour"}, {},
     {**_trend("2026-11-30 08:00", "2026-11-30 09:11", "hour", {
         "2026-11-30T08:00:00Z": (3, 1, 5), "2026-11-30T09:00:00Z": (1, 1, 0)}),
      "from": "2026-11-30T08:03:00Z"}),
    ("/stats/trends", {"tenant": "beta", "from": "2026-11-30", "to": "2026-12-01"}, {},
     _trend("2026-11-30 00:00", "2026-12-01 00:00", "day", {
         "2026-11-30T00:00:00Z": (2, 1, 1)}, tenant="beta")),
    ("/stats/search-trends", {"tenant": "acme", "from": "2026-11-30T08:00:00Z",
                              "to": "2026-11-30T10:00:00Z", "bucket": "hour"}, {}, {
        "tenant": "acme", "from": "2026-11-30T08:00:00Z", "to": "2026-11-30T10:00:00Z",
        "bucket": "hour", "searches": 5, "hits": 3, "failed": 1, "items": [
            _search_bucket("2026-11-30T08:00:00Z", 3, 1, 1, 1, 0, 3, 43.333, 100.0),
            _search_bucket("2026-11-30T09:00:00Z", 2, 2, 0, 0, 1, 6, 10.0, 15.0)]}),
    ("/stats/search-trends", {"tenant": "ACME", "from": "2026-11-30", "to": "2026-12-01"}, {}, {
        "tenant": "ACME", "from": "2026-11-30T00:00:00Z", "to": "2026-12-01T00:00:00Z",
        "bucket": "day", "searches": 1, "hits": 1, "failed": 0, "items": [
            _search_bucket("2026-11-30T00:00:00Z", 1, 1, 0, 0, 0, 2, 7.0, 7.0)]}),
    ("/stats/search-trends", {"tenant": "nobody", "from": "2026-11-30", "to": "2026-12-01"}, {}, {
        "tenant": "nobody", "from": "2026-11-30T00:00:00Z", "to": "2026-12-01T00:00:00Z",
        "bucket": "day", "searches": 0, "hits": 0, "failed": 0, "items": [
            _search_bucket("2026-11-30T00:00:00Z")]}),
]

# path, query, path values, status, error code, parameter at fault
BAD_REQUESTS: list[tuple[str, dict[str, str], dict[str, str], int, str, str]] = [
    ("/stats/overview", {}, {}, 400, "missing_parameter", "tenant"),
    ("/stats/overview", {"tenant": ""}, {}, 400, "invalid_parameter", "tenant"),
    ("/stats/overview", {"tenant": "acme", "tenantt": "x"}, {}, 400, "unknown_parameter",
     "tenantt"),
    ("/stats/memory-types", {"tenant": "acme", "by": "color"}, {}, 400, "invalid_parameter", "by"),
    ("/stats/top-agents", {"tenant": "acme", "limit": "0"}, {}, 400, "out_of_range", "limit"),
    ("/stats/top-agents", {"tenant": "acme", "limit": "101"}, {}, 400, "out_of_range", "limit"),
    ("/stats/top-agents", {"tenant": "acme", "offset": "-3"}, {}, 400, "out_of_range", "offset"),
    ("/stats/top-agents", {"tenant": "acme", "limit": "many"}, {}, 400, "invalid_parameter",
     "limit"),
    ("/stats/trends", {"tenant": "acme", "to": "2026-12-01"}, {}, 400, "missing_parameter", "from"),
    ("/stats/trends", {"tenant": "acme", "from": "30/11/2026", "to": "2026-12-01"}, {}, 400,
     "invalid_parameter", "from"),
    ("/stats/trends", {"tenant": "acme", "from": "2026-12-01", "to": "2026-11-30"}, {}, 400,
     "invalid_range", "from"),
    ("/stats/trends", {"tenant": "acme", "from": "2026-11-30", "to": "2026-12-01",
                       "bucket": "minute"}, {}, 400, "invalid_parameter", "bucket"),
    ("/stats/trends", {"tenant": "acme", "from": "2020-01-01", "to": "2026-12-01",
                       "bucket": "hour"}, {}, 400, "too_many_buckets", "bucket"),
    ("/stats/search-trends", {"tenant": "acme", "from": "2026-11-30", "to": "tomorrow"}, {}, 400,
     "invalid_parameter", "to"),
    ("/stats/cubes/{cube_id}", {"tenant": "acme", "user": ""}, {"cube_id": "user_profile"}, 400,
     "invalid_parameter", "user"),
    ("/stats/cubes/{cube_id}", {"tenant": "acme"}, {"cube_id": "c" * 256}, 400,
     "invalid_parameter", "cube_id"),
]
