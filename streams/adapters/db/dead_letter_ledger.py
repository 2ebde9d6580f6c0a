"""DeadLetterLedger: which records were dead-lettered, and whether it went out.

One row per source record (topic, partition, offset). A row is recorded
*before* its dead letter is published (``sent`` 0) and marked once the broker
acknowledged it (``sent`` 1); see :mod:`streams.adapters.kafka.dead_letters` for how the two
steps make a dead letter exactly once.

Each row keeps a digest of its record (key, value, timestamp): once a topic is
deleted and created again its offsets start over, and a different record read at
a place recorded before replaces that row (recorded afresh, by this call) instead
of being taken for the record dead-lettered there. A row without a digest
(recorded before digests were kept) counts as another record's.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from streams.adapters.db.engine import insert_ignoring_duplicates
from streams.adapters.db.schema.conversation import dead_letter_ledger
from streams.clock import aware_utc, naive_utc

SourceKey = tuple[str, int, int]  # topic, partition, offset
Wanted = tuple[int, str]  # dead-letter partition, digest of the record
_CHUNK = 200


@dataclass(frozen=True)
class LedgerEntry:
    dlq_partition: int
    sent: bool
    recorded_at: datetime  # aware, UTC
    mine: bool  # recorded by this call (not by an earlier attempt)


class DeadLetterLedger:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._insert = insert_ignoring_duplicates(
            engine, dead_letter_ledger, ["source_topic", "source_partition", "source_offset"])

    def _where(self, keys: Sequence[SourceKey]) -> ColumnElement[bool]:
        c = dead_letter_ledger.c
        return or_(*(and_(c.source_topic == t, c.source_partition == p, c.source_offset == o)
                     for t, p, o in keys))

    async def record(self, wanted: dict[SourceKey, Wanted],
                     now: datetime) -> dict[SourceKey, LedgerEntry]:
        """Record ``wanted`` (source -> dead-letter partition and record digest) where
        not recorded yet, or recorded for another record (another digest, or none);
        returns every entry as it now stands (one of the same record kept as it was)."""
        if not wanted:
            return {}
        token = uuid.uuid4().hex
        rows = [{"source_topic": t, "source_partition": p, "source_offset": o,
                 "dlq_partition": part, "sent": 0, "recorded_at": naive_utc(now),
                 "recorded_by": token, "record_digest": digest}
                for (t, p, o), (part, digest) in wanted.items()]
        keys = list(wanted)
        async with self.engine.begin() as conn:
            await conn.execute(self._insert, rows)
            found = await self._entries(conn, keys, token)
            others = [k for k in keys if found[k][1] != wanted[k][1]]
            for t, p, o in others:  # another record was read here before the topic was new
                c = dead_letter_ledger.c
                part, digest = wanted[(t, p, o)]
                await conn.execute(update(dead_letter_ledger).where(
                    c.source_topic == t, c.source_partition == p, c.source_offset == o)
                    .values(dlq_partition=part, sent=0, recorded_at=naive_utc(now),
                            recorded_by=token, record_digest=digest))
            if others:
                found.update(await self._entries(conn, others, token))
        return {k: entry for k, (entry, _) in found.items()}

    async def _entries(self, conn: AsyncConnection, keys: Sequence[SourceKey],
                       token: str) -> dict[SourceKey, tuple[LedgerEntry, str | None]]:
        c = dead_letter_ledger.c
        found: dict[SourceKey, tuple[LedgerEntry, str | None]] = {}
        for i in range(0, len(keys), _CHUNK):
            result = await conn.execute(
                select(c.source_topic, c.source_partition, c.source_offset, c.dlq_partition,
                       c.sent, c.recorded_at, c.recorded_by, c.record_digest)
                .where(self._where(keys[i:i + _CHUNK])))
            for r in result:
                found[(r.source_topic, int(r.source_partition), int(r.source_offset))] = (
                    LedgerEntry(int(r.dlq_partition), bool(r.sent), aware_utc(r.recorded_at),
                                r.recorded_by == token), r.record_digest)
        return found

    async def mark_sent(self, keys: Sequence[SourceKey]) -> None:
        async with self.engine.begin() as conn:
            for i in range(0, len(keys), _CHUNK):
                await conn.execute(update(dead_letter_ledger)
                                   .where(self._where(keys[i:i + _CHUNK]))
                                   .values(sent=1))

    async def purge(self, cutoff: datetime) -> int:
        """Forget dead letters recorded before ``cutoff``; returns how many."""
        async with self.engine.begin() as conn:
            result = await conn.execute(delete(dead_letter_ledger).where(
                dead_letter_ledger.c.recorded_at < naive_utc(cutoff)))
        return int(result.rowcount or 0)
