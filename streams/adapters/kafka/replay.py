"""Re-driving dead letters to the topic they failed on.

Every dead letter carries its original key and bytes and the header
``memstream.source.topic`` (ingest dead letters name ``chat.messages`` or the
sub-agent topic, consolidation dead letters ``memory.session-closed``).
:class:`DeadLetterReplayer` produces each selected record there again, with
the original key, value and headers (memstream's own ``memstream.*`` headers
dropped, ``memstream.replayed_from`` added), so it takes the same partition
and the same path as the first time. Everything downstream is idempotent, so
re-driving a record twice stores nothing twice.

A re-driven record also carries where it was first read
(``memstream.first.topic`` / ``.partition`` / ``.offset``, kept across re-drives):
an erasure recorded meanwhile covers it by that first offset as it would have
covered the original.

What was re-driven is remembered as the committed offsets of a replay
consumer group (one per tenant filter), committed only after the records
before them were delivered: running the command again continues after the
last record it handled. ``restart`` starts over from the beginning (or from
``since``). ``since`` also skips records that failed before that time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from streams.adapters.kafka.clients import consumer, partitions, producer
from streams.settings import KafkaSettings
from streams.wire.headers import (
    FAILED_AT,
    FIRST_READ,
    PREFIX,
    REPLAYED_FROM,
    SOURCE_PLACE,
    SOURCE_TOPIC,
    Headers,
    header,
)


@dataclass(frozen=True)
class ReplayFilter:
    tenant_id: str | None = None
    since: datetime | None = None
    limit: int | None = None


@dataclass
class ReplayReport:
    considered: int = 0
    redriven: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    by_topic: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def replay_group(app_id: str, tenant_id: str | None) -> str:
    return f"{app_id}-replay" + (f".{tenant_id}" if tenant_id else "")


def tenant_of(value: bytes | None) -> str | None:
    try:
        doc = json.loads(value or b"")
    except ValueError:
        return None
    tenant = doc.get("tenant_id") if isinstance(doc, dict) else None
    return tenant if isinstance(tenant, str) else None


def failed_at(headers: Headers) -> datetime | None:
    raw = header(headers, FAILED_AT)
    try:
        return datetime.fromisoformat(raw.decode()) if raw else None
    except ValueError:
        return None


def redrive_headers(headers: Headers, origin: str) -> Headers:
    """The original headers, and where the record was first read
    (``memstream.first.*``: kept from an earlier re-drive, or the dead letter's source),
    so an erasure recorded since still covers it by its first offset."""
    first = [(k, v) for k, v in headers if k in FIRST_READ]
    if len(first) != len(FIRST_READ):
        place = [header(headers, source) for source in SOURCE_PLACE]
        first = ([(name, v) for name, v in zip(FIRST_READ, place, strict=True) if v]
                 if all(place) else [])
    return [*((k, v) for k, v in headers if not k.startswith(PREFIX)), *first,
            (REPLAYED_FROM, origin.encode())]


def skip_reason(headers: Headers, value: bytes | None, f: ReplayFilter) -> str | None:
    """Why a dead letter is not re-driven under ``f``, or None."""
    if not header(headers, SOURCE_TOPIC):
        return "no_source_topic"
    if f.tenant_id is not None and tenant_of(value) != f.tenant_id:
        return "other_tenant"
    when = failed_at(headers)
    if f.since is not None and when is not None and when < f.since:
        return "before_since"
    return None


class DeadLetterReplayer:
    def __init__(self, k: KafkaSettings, dlq_topic: str, group: str, f: ReplayFilter, *,
                 restart: bool = False, dry_run: bool = False,
                 progress: Callable[[int, int, ReplayReport], None] | None = None) -> None:
        self.k = k
        self.dlq_topic = dlq_topic
        self.group = group
        self.filter = f
        self.restart = restart
        self.dry_run = dry_run
        self.progress = progress or (lambda done, total, report: None)

    async def _start_positions(self, c: AIOKafkaConsumer, tps: list[TopicPartition]) -> None:
        await c.seek_to_beginning(*tps)
        if not self.restart:
            for tp in tps:
                committed = await c.committed(tp)
                if committed is not None:
                    c.seek(tp, committed)
        if self.filter.since is not None:
            found = await c.offsets_for_times(
                {tp: int(self.filter.since.timestamp() * 1000) for tp in tps})
            for tp, at in found.items():
                if at is not None and at.offset > await c.position(tp):
                    c.seek(tp, at.offset)

    async def run(self) -> ReplayReport:
        report = ReplayReport()
        tps = [TopicPartition(self.dlq_topic, n) for n in await partitions(self.k, self.dlq_topic)]
        if not tps:
            return report
        c = consumer(self.k, group_id=self.group, enable_auto_commit=False)
        p = producer(self.k)
        await c.start()
        await p.start()
        try:
            c.assign(tps)
            await self._start_positions(c, tps)
            ends = await c.end_offsets(tps)
            start = {tp: await c.position(tp) for tp in tps}
            total = sum(max(0, ends[tp] - start[tp]) for tp in tps)
            self.progress(0, total, report)
            await self._loop(c, p, tps, ends, total, report)
        finally:
            await p.stop()
            await c.stop()
        return report

    async def _loop(self, c: AIOKafkaConsumer, p: Any, tps: list[TopicPartition],
                    ends: dict[TopicPartition, int], total: int, report: ReplayReport) -> None:
        limit = self.filter.limit
        while True:
            open_tps = [tp for tp in tps if await c.position(tp) < ends[tp]]
            if not open_tps or (limit is not None and report.redriven >= limit):
                return
            batch = await c.getmany(*open_tps, timeout_ms=2000, max_records=500)
            commit: dict[TopicPartition, OffsetAndMetadata] = {}
            futures = []
            for tp, records in batch.items():
                for r in records:
                    if r.offset >= ends[tp] or (limit is not None and report.redriven >= limit):
                        break
                    report.considered += 1
                    headers: Headers = [(k, bytes(v)) for k, v in (r.headers or ())]
                    why = skip_reason(headers, r.value, self.filter)
                    if why is not None:
                        report.skip(why)
                    else:
                        target = (header(headers, SOURCE_TOPIC) or b"").decode()
                        origin = f"{tp.topic}/{tp.partition}/{r.offset}"
                        if not self.dry_run:
                            futures.append(await p.send(target, r.value, key=r.key,
                                                        headers=redrive_headers(headers, origin)))
                        report.redriven += 1
                        report.by_topic[target] = report.by_topic.get(target, 0) + 1
                    commit[tp] = OffsetAndMetadata(r.offset + 1, "")
                # anything after a stop above is read again by the next run
                c.seek(tp, commit[tp].offset if tp in commit else await c.position(tp))
            for fut in futures:
                await fut
            if commit and not self.dry_run:
                await c.commit(commit)
            self.progress(report.considered, total, report)
