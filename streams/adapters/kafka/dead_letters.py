"""Dead letters exactly once per source record, whoever publishes them.

A stage dead-letters a record, then acknowledges it; a worker killed in
between — or stuck between the two while the database is down — has the
record delivered again, and a plain publisher would dead-letter it twice.
:class:`ExactlyOnceDeadLetters` wraps the worker's publisher: records for the
dead-letter topic that name their source (the ``memstream.source.*`` headers
every dead letter carries) go through the :class:`DeadLetterLedger`:

1. the source is recorded, with the dead-letter partition it goes to (fixed:
   the source partition modulo the topic's partitions) and a digest of the
   record (its key, value and timestamp, :func:`record_digest`), before the
   publish;
2. a source already marked *sent* for the same record is not published again;
3. a source recorded earlier for the same record but not marked (the publisher
   died between publish and mark) is looked for in its dead-letter partition,
   from just before it was recorded: found, it is marked; not found, it is
   published;
4. what was published is marked *sent*.

A source recorded for another record — its topic was deleted and created again,
so its offsets started over — is recorded afresh for this one and published: a
new poison record is never taken for the old one at its offset.

Everything else passes through unchanged. Ledger rows are purged with the
consolidation ledger's retention.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from streams.adapters.db.dead_letter_ledger import DeadLetterLedger, SourceKey
from streams.adapters.kafka.clients import partitions, records_since
from streams.metrics import DEAD_LETTERS_DEDUPLICATED
from streams.settings import KafkaSettings
from streams.wire.envelope import Outgoing, Publisher
from streams.wire.headers import SOURCE_PLACE, SOURCE_TIMESTAMP, header

log = logging.getLogger(__name__)
LOOK_BACK = timedelta(seconds=10)


def source_of(record: Outgoing) -> SourceKey | None:
    topic, partition, offset = (header(record.headers, name) for name in SOURCE_PLACE)
    if topic is None or partition is None or offset is None:
        return None
    try:
        return topic.decode(), int(partition), int(offset)
    except (UnicodeDecodeError, ValueError):
        return None


def record_digest(record: Outgoing) -> str:
    """A digest of the source record a dead letter carries: its key, value and
    timestamp (the ``memstream.source.timestamp`` header), the same on every delivery
    of that record (hex, 64 characters)."""
    h = hashlib.sha256()
    for part in (record.key, record.value, header(record.headers, SOURCE_TIMESTAMP)):
        h.update(b"-" if part is None else b"%d:" % len(part) + part)
    return h.hexdigest()


class DeadLetterFinder:
    """Reads a dead-letter partition for the records that name given sources."""

    def __init__(self, kafka: KafkaSettings) -> None:
        self.kafka = kafka

    async def partitions(self, topic: str) -> int:
        return len(await partitions(self.kafka, topic))

    async def published(self, topic: str, partition: int, since: datetime,
                        wanted: dict[SourceKey, str]) -> set[SourceKey]:
        """Which of ``wanted`` (source -> record digest) have a dead letter of that
        record in ``topic``/``partition`` since ``since``."""
        found: set[SourceKey] = set()
        async with contextlib.aclosing(records_since(
                self.kafka, topic, partition, int(since.timestamp() * 1000))) as records:
            async for r in records:
                letter = Outgoing(topic, r.key, r.value, list(r.headers or ()))
                key = source_of(letter)
                if key in wanted and record_digest(letter) == wanted[key]:
                    found.add(key)
                    if found == wanted.keys():
                        break
        return found


class ExactlyOnceDeadLetters:
    """A :class:`~streams.wire.envelope.Publisher` (see the module docstring)."""

    def __init__(self, inner: Publisher, *, dlq_topic: str,
                 ledger: Callable[[], DeadLetterLedger], finder: DeadLetterFinder,
                 clock: Callable[[], float] = time.time) -> None:
        self.inner = inner
        self.dlq_topic = dlq_topic
        self._ledger = ledger
        self.finder = finder
        self.clock = clock
        self._partitions: int | None = None

    async def publish(self, records: Sequence[Outgoing]) -> None:
        letters: dict[SourceKey, Outgoing] = {}
        others: list[Outgoing] = []
        for r in records:
            key = source_of(r) if r.topic == self.dlq_topic else None
            if key is None:
                others.append(r)
            else:
                letters.setdefault(key, r)
        if others:
            await self.inner.publish(others)
        if letters:
            await self._dead_letters(letters)

    async def _count(self) -> int:
        if self._partitions is None:
            self._partitions = await self.finder.partitions(self.dlq_topic) or None
        return self._partitions or 0

    async def _dead_letters(self, letters: dict[SourceKey, Outgoing]) -> None:
        n = await self._count()
        if n == 0:  # the topic's partitions are unknown: nowhere to look a letter up
            await self.inner.publish(list(letters.values()))
            return
        ledger = self._ledger()
        now = datetime.fromtimestamp(self.clock(), UTC)
        digests = {k: record_digest(r) for k, r in letters.items()}
        entries = await ledger.record({k: (k[1] % n, digests[k]) for k in letters}, now)
        send: list[SourceKey] = []
        earlier: dict[int, dict[SourceKey, str]] = {}
        since: dict[int, datetime] = {}
        for key in letters:
            entry = entries[key]
            if entry.sent:
                DEAD_LETTERS_DEDUPLICATED.inc()
            elif not entry.mine:
                earlier.setdefault(entry.dlq_partition, {})[key] = digests[key]
                since[entry.dlq_partition] = min(since.get(entry.dlq_partition, now),
                                                 entry.recorded_at)
            else:
                send.append(key)
        published: list[SourceKey] = []
        for part, keys in earlier.items():
            there = await self.finder.published(self.dlq_topic, part, since[part] - LOOK_BACK,
                                                keys)
            DEAD_LETTERS_DEDUPLICATED.inc(len(there))
            published += there
            send += sorted(set(keys) - there)
        if send:
            await self.inner.publish([
                Outgoing(letters[k].topic, letters[k].key, letters[k].value,
                         letters[k].headers, entries[k].dlq_partition) for k in send])
        if send or published:
            await ledger.mark_sent([*send, *published])

