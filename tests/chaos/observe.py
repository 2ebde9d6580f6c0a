"""Reading a chaos phase from the outside: SQL, topics, Redis and the broker's
consumer groups — never the workers' own view.

:class:`Observer` also answers the cheap progress questions the settle wait
asks every second (:meth:`Observer.progress`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.schema.consolidation import consolidation_ledger, consolidation_run
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.memory import memory, memory_scope_stats
from streams.adapters.kafka.clients import partitions
from streams.clock import naive_utc_now
from streams.settings import KafkaSettings
from streams.wire.spring_reply import CORRELATION_ID
from tests.chaos.snapshot import DeadLetter, Lag, MemoryRow, Snapshot, StoredMessage
from tests.support.services import KAFKA_BOOTSTRAP, KAFKA_BROKER

_KAFKA = KafkaSettings(broker=KAFKA_BROKER)
LAG_RECHECKS = 5
"""Times the final lag is read again, a second apart, while some partition is
behind: an idle check the scan sent a moment before the snapshot (a closed
state's expiry checked again) is consumed within it; a stuck partition stays."""


@dataclass(frozen=True)
class Progress:
    """What changes while a phase is still working; equal twice: no progress."""

    messages: int
    done_runs: int
    open_runs: int
    dead_letters: int
    replies: int
    behind: int  # partitions some group has not consumed to the end
    consumed: int  # sum of committed offsets


def _header(headers: Sequence[tuple[str, bytes]], name: str) -> str:
    return next((v.decode(errors="replace") for k, v in headers if k == name), "")


class Observer:
    def __init__(self, *, db_url: str, redis_url: str, redis_prefix: str,
                 input_topics: Sequence[str], dlq_topic: str, reply_topic: str) -> None:
        self.db_url = db_url
        self.redis_url = redis_url
        self.redis_prefix = redis_prefix
        self.input_topics = list(input_topics)
        self.dlq_topic = dlq_topic
        self.reply_topic = reply_topic
        self._engine: AsyncEngine | None = None

    def engine(self) -> AsyncEngine:
        if self._engine is None:  # pre-ping: the database may have restarted since
            self._engine = create_async_engine(self.db_url, pool_size=1, pool_pre_ping=True)
        return self._engine

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    # ------------------------------------------------------------------ kafka
    async def _ends(self, topics: Sequence[str]) -> dict[TopicPartition, int]:
        tps = [TopicPartition(t, p) for t in topics for p in await partitions(_KAFKA, t)]
        if not tps:
            return {}
        c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP)
        await c.start()
        try:
            return dict(await c.end_offsets(tps))
        finally:
            await c.stop()

    async def read_topic(self, topic: str) -> list[tuple[bytes | None, list[tuple[str, bytes]]]]:
        """Every record of ``topic`` (value, headers), all partitions, from the start."""
        wanted = {tp: end for tp, end in (await self._ends([topic])).items() if end > 0}
        out: list[tuple[bytes | None, list[tuple[str, bytes]]]] = []
        if not wanted:
            return out
        c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign(list(wanted))
            await c.seek_to_beginning(*wanted)
            while any([await c.position(tp) < end for tp, end in wanted.items()]):
                for records in (await c.getmany(timeout_ms=500)).values():
                    out.extend((r.value, list(r.headers)) for r in records)
            return out
        finally:
            await c.stop()

    async def consumer_lag(self) -> tuple[list[Lag], list[tuple[str, int, int]]]:
        """Every consumer group the broker knows that committed on an input topic, with
        each partition of those topics; and input partitions no group consumed to the end."""
        admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
        await admin.start()
        try:
            groups = [g[0] for g in await admin.list_consumer_groups()]
            committed: dict[str, dict[TopicPartition, int]] = {}
            for group in groups:
                offsets = await _group_offsets(admin, group)
                mine = {tp: o.offset for tp, o in offsets.items()
                        if tp.topic in self.input_topics and o.offset >= 0}
                if mine:
                    committed[group] = mine
        finally:
            await admin.close()
        ends = await self._ends(self.input_topics)
        lag: list[Lag] = []
        for group, mine in sorted(committed.items()):
            topics = {tp.topic for tp in mine}
            for tp, end in sorted(ends.items()):
                if tp.topic in topics:
                    lag.append(Lag(group, tp.topic, tp.partition, mine.get(tp, 0), end))
        uncovered = [(tp.topic, tp.partition, end) for tp, end in sorted(ends.items())
                     if end > 0 and not any(m.get(tp, 0) >= end for m in committed.values())]
        return lag, uncovered

    # -------------------------------------------------------------------- sql
    async def read_sql(self, snap: Snapshot) -> None:
        m, r, led = conversation_message.c, consolidation_run.c, consolidation_ledger.c
        mem, scope = memory.c, memory_scope_stats.c
        async with self.engine().connect() as conn:
            rows = await conn.execute(select(m.id, m.tenant_id, m.event_id, m.conversation_id)
                                      .order_by(m.id))
            snap.messages = [StoredMessage(int(x.id), x.tenant_id, x.event_id,
                                           x.conversation_id) for x in rows]
            snap.runs = {x.closed_id: x.status for x in await conn.execute(
                select(r.closed_id, r.status))}
            ledger: dict[str, list[str]] = {}
            for x in await conn.execute(select(led.closed_id, led.event_id)
                                        .order_by(led.message_id)):
                ledger.setdefault(x.closed_id, []).append(x.event_id)
            snap.ledger = ledger
            q = (select(mem.id, mem.tenant_id, mem.cube, scope.owner_id, mem.kind, mem.type,
                        mem.content, mem.source_event_ids)
                 .join(memory_scope_stats, scope.id == mem.scope_id)
                 .where(mem.valid_to.is_(None)).order_by(mem.id))
            snap.memories = [MemoryRow(x.tenant_id, x.cube, x.owner_id, x.kind, x.type,
                                       x.content, tuple(json.loads(x.source_event_ids)),
                                       str(x.id))
                             for x in await conn.execute(q)]

    # ------------------------------------------------------------------ redis
    async def read_redis(self, snap: Snapshot) -> None:
        redis = Redis.from_url(self.redis_url)
        try:
            lists: dict[str, list[str]] = {}
            async for key in redis.scan_iter(match=f"{self.redis_prefix}:*:hist", count=500):
                name = key.decode()
                tag = name[name.index("{") + 1:name.rindex("}")]
                lists[tag] = [json.loads(v)["event_id"] for v in await redis.lrange(key, 0, -1)]
            snap.redis_lists = lists
        finally:
            await redis.aclose()

    async def forget_redis(self) -> None:
        """Delete the phase's keys (the shared Redis keeps other runs' keys for a day)."""
        redis = Redis.from_url(self.redis_url)
        try:
            keys = [k async for k in redis.scan_iter(match=f"{self.redis_prefix}:*", count=500)]
            for i in range(0, len(keys), 500):
                await redis.delete(*keys[i:i + 500])
        finally:
            await redis.aclose()

    # ------------------------------------------------------------------- both
    async def snapshot(self, queries_sent: Sequence[bytes]) -> Snapshot:
        snap = Snapshot(queries_sent=list(queries_sent))
        await self.read_sql(snap)
        await self.read_redis(snap)
        snap.dead_letters = [
            DeadLetter(value or b"", _header(h, "memstream.stage"),
                       _header(h, "memstream.error.reason"), _header(h, "memstream.source.topic"))
            for value, h in await self.read_topic(self.dlq_topic)]
        for value, h in await self.read_topic(self.reply_topic):
            cid = next((v for k, v in h if k == CORRELATION_ID), b"")
            snap.replies.append(cid)
            error = (json.loads(value or b"{}").get("error") or {}).get("code")
            if error:
                snap.reply_errors.append(str(error))
        snap.lag, snap.uncovered = await self.consumer_lag()
        for _ in range(LAG_RECHECKS):  # a record produced a moment ago is no lag
            if not snap.uncovered and all(x.committed >= x.end for x in snap.lag):
                break
            await asyncio.sleep(1.0)
            snap.lag, snap.uncovered = await self.consumer_lag()
        return snap

    async def progress(self) -> Progress:
        m, r = conversation_message.c, consolidation_run.c
        async with self.engine().connect() as conn:
            messages = (await conn.execute(select(func.count(m.id)))).scalar_one()
            done = (await conn.execute(
                select(func.count()).where(r.status == "done"))).scalar_one()
            runs = (await conn.execute(select(func.count(r.closed_id)))).scalar_one()
        ends = await self._ends([self.dlq_topic, self.reply_topic])
        lag, uncovered = await self.consumer_lag()
        return Progress(
            messages=int(messages), done_runs=int(done), open_runs=int(runs) - int(done),
            dead_letters=sum(e for tp, e in ends.items() if tp.topic == self.dlq_topic),
            replies=sum(e for tp, e in ends.items() if tp.topic == self.reply_topic),
            behind=sum(1 for x in lag if x.committed < x.end) + len(uncovered),
            consumed=sum(x.committed for x in lag))

    async def unfinished_runs(self, touched_within_s: float | None = None) -> set[str]:
        """Runs not done (and updated in the last ``touched_within_s``, when given)."""
        r = consolidation_run.c
        q = select(r.closed_id).where(r.status != "done")
        if touched_within_s is not None:
            since = naive_utc_now() - timedelta(seconds=touched_within_s)
            q = q.where(r.updated_at >= since)
        async with self.engine().connect() as conn:
            return {x.closed_id for x in await conn.execute(q)}


async def _group_offsets(admin: AIOKafkaAdminClient, group: str) -> Any:
    """A group's committed offsets; a coordinator not known yet (a retriable error,
    as on a broker that just created its offsets topic) is asked again."""
    for attempt in range(20):
        try:
            return await admin.list_consumer_group_offsets(group)
        except KafkaError as exc:
            if not exc.retriable or attempt == 19:
                raise
            await asyncio.sleep(0.25)
    raise AssertionError("unreachable")
