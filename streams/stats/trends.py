"""The stats SQL over time: messages and memories, and memory searches, per bucket.

Each answer lists every bucket of the range, empty ones with zeros, so a chart
has no gaps and the counts of a range add up. Rows are counted when
``from <= created_at < to``; messages by their event time (``created_at`` of
the chat event), memories and searches by when memstream wrote them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, case, distinct, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.memory import memory
from streams.adapters.db.schema.stats import memory_search_log
from streams.stats.buckets import EpochBucket, TimeRange, bucket_start, iso
from streams.stats.queries import tenant_is

_msg, _mem, _log = conversation_message.c, memory.c, memory_search_log.c


def _range(span: TimeRange) -> dict[str, Any]:
    return {"from": iso(span.start), "to": iso(span.end), "bucket": span.bucket}


async def activity(conn: AsyncConnection, tenant: str, span: TimeRange) -> dict[str, Any]:
    """Messages, active conversations and memories created per bucket."""
    b = EpochBucket(_msg.created_at, span.seconds).label("b")
    messages = {int(r[0]): (int(r[1]), int(r[2])) for r in (await conn.execute(
        select(b, func.count(), func.count(distinct(_msg.conversation_id)))
        .where(tenant_is(conn, _msg.tenant_id, tenant), _msg.created_at >= span.start,
               _msg.created_at < span.end)
        .group_by(b))).all()}
    mb = EpochBucket(_mem.created_at, span.seconds).label("b")
    memories = {int(r[0]): int(r[1]) for r in (await conn.execute(
        select(mb, func.count())
        .where(_mem.tenant_id == tenant, _mem.created_at >= span.start,
               _mem.created_at < span.end)
        .group_by(mb))).all()}
    items = []
    for n in span.numbers():
        msgs, convs = messages.get(n, (0, 0))
        items.append({"bucket": iso(bucket_start(n, span.seconds)), "messages": msgs,
                      "conversations": convs, "memories": memories.get(n, 0)})
    return {
        "tenant": tenant,
        **_range(span),
        "messages": sum(i["messages"] for i in items),
        "memories": sum(i["memories"] for i in items),
        "items": items,
    }


def _sum_if(cond: Any) -> Any:
    return func.sum(case((cond, 1), else_=0), type_=Integer)


async def searches(conn: AsyncConnection, tenant: str, span: TimeRange) -> dict[str, Any]:
    """Long-term memory searches per bucket: volume, hits, failures, results, latency.

    ``hits``: answered with at least one memory; ``empty``: answered with none;
    ``failed``: the provider did not answer (any outcome but ``ok``). The three
    add up to ``searches``.
    """
    b = EpochBucket(_log.created_at, span.seconds).label("b")
    ok = _log.outcome == "ok"
    rows = (await conn.execute(
        select(b, func.count(), _sum_if(ok & (_log.results > 0)), _sum_if(ok & (_log.results == 0)),
               _sum_if(~ok), _sum_if(_log.keyword_only), func.sum(_log.results),
               func.avg(_log.latency_ms), func.max(_log.latency_ms))
        .where(_log.tenant_id == tenant, _log.created_at >= span.start,
               _log.created_at < span.end)
        .group_by(b))).all()
    by_bucket = {int(r[0]): r for r in rows}
    items = []
    for n in span.numbers():
        r = by_bucket.get(n)
        items.append({
            "bucket": iso(bucket_start(n, span.seconds)),
            "searches": int(r[1]) if r else 0,
            "hits": int(r[2] or 0) if r else 0,
            "empty": int(r[3] or 0) if r else 0,
            "failed": int(r[4] or 0) if r else 0,
            "keyword_only": int(r[5] or 0) if r else 0,
            "results": int(r[6] or 0) if r else 0,
            "avg_latency_ms": round(float(r[7]), 3) if r and r[7] is not None else None,
            "max_latency_ms": round(float(r[8]), 3) if r and r[8] is not None else None,
        })
    return {
        "tenant": tenant,
        **_range(span),
        "searches": sum(i["searches"] for i in items),
        "hits": sum(i["hits"] for i in items),
        "failed": sum(i["failed"] for i in items),
        "items": items,
    }
