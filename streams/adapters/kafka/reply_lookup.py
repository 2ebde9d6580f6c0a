"""ReplyLookup: whether a reply to a request is in its reply topic already.

A worker killed after the broker took a reply and before the reply was
recorded as sent leaves its request uncommitted. The next owner of the request
finds, in Redis, when the killed worker began answering it
(:meth:`~streams.query.answered.AnsweredRequests.claim`), and asks here whether
a reply with the request's correlation id reached the reply topic since then.

The partitions the reply had to reach are read — the one the request
addressed; else every partition when an unaddressed reply goes to all of them
(``every_partition``, where the reply counts as sent only when every copy is
there, so that no caller is left without one), or any one the producer chose
— from ``since_ms`` less ``margin_s`` (for a topic that stamps records with the
broker's clock) up to each partition's end at the time of the lookup, and the
``kafka_correlationId`` header is matched. The previous owner is gone by then
(a killed member is taken over only after the query session timeout; a member
that let the partition go waited for its replies on their way, see
:mod:`streams.query.answering`), so what it sent is in the topic or never will
be. The answer is ``None`` when the topic could not be read within
``timeout_s`` (waiting for a turn included: at most ``AT_ONCE`` lookups run at
once): the caller then answers, preferring a second reply to none. This is the
dead letters' mechanism (:mod:`streams.adapters.kafka.dead_letters`) for replies.

A lookup runs inside the handling of a request whose caller waits, so its
consumers (up to ``AT_ONCE``, with no group, each assigned the partition it reads)
are started once and kept, paused between lookups; a reply topic's partitions are
kept ``PARTITIONS_TTL_S``. Starting clients per lookup costs round trips and, on a
broker with many topics, metadata decoded on the event loop; no client kept here
asks for every topic's metadata. A consumer whose lookup failed or was cancelled is
stopped in the background, not reused; :meth:`ReplyLookup.close` stops them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer

from streams.adapters.kafka.clients import consumer, partitions, read_since
from streams.kept_tasks import KeptTasks
from streams.settings import KafkaSettings
from streams.wire.headers import header
from streams.wire.spring_reply import CORRELATION_ID

log = logging.getLogger(__name__)

AT_ONCE = 4  # lookups in flight: a takeover may bring a killed worker's every request
CLOSE_WAIT_S = 5.0  # close() waits this long at most for the clients to stop
PARTITIONS_TTL_S = 60.0  # a reply topic's partitions are looked up again after this
PARTITIONS_HELD = 1024  # reply topics whose partitions are kept


class ReplyLookup:
    def __init__(self, kafka: KafkaSettings, *, every_partition: bool = True,
                 timeout_s: float = 5.0, margin_s: float = 5.0) -> None:
        self.kafka = kafka
        self.every_partition = every_partition
        self.timeout_s = timeout_s
        self.margin_s = margin_s
        self.clients_started = 0  # over the lookup's life
        self._at_once = asyncio.Semaphore(AT_ONCE)
        self._partition_lists: dict[str, tuple[float, list[int]]] = {}  # topic: (when, numbers)
        self._idle: list[AIOKafkaConsumer] = []  # started, paused
        self._stopping = KeptTasks("a reply lookup client stopping")
        self._closed = False

    async def sent(self, topic: str, correlation_id: bytes, since_ms: int,
                   partition: int | None = None) -> bool | None:
        """True when the reply carrying ``correlation_id`` is in ``topic`` (in
        ``partition`` when the request addressed one), timestamped from
        ``since_ms`` (less the margin) on; False when it is not; None when unknown."""
        try:
            async with asyncio.timeout(self.timeout_s), self._at_once:
                return await self._scan(topic, correlation_id,
                                        since_ms - int(self.margin_s * 1000), partition)
        except Exception as exc:  # unknown: the request is answered
            log.warning("reply lookup in %s failed, answering anyway: %s: %s",
                        topic, type(exc).__name__, exc)
            return None

    async def close(self) -> None:
        """Stop the clients (those of lookups under way once they end); later lookups
        say they do not know."""
        self._closed = True
        idle, self._idle = self._idle, []
        for c in idle:
            self._stop_later(c.stop())
        await self._stopping.wait(CLOSE_WAIT_S)

    async def _scan(self, topic: str, correlation_id: bytes, from_ms: int,
                    partition: int | None) -> bool:
        if partition is not None:
            numbers = [partition]
        else:
            numbers = await self._partitions(topic)
        every = partition is None and self.every_partition
        async with self._reader() as reader:
            for number in numbers:
                there = await self._in(reader, topic, number, correlation_id, from_ms)
                if there != every:  # one copy is enough, or one is missing (sent again, to all)
                    return there
        return every and bool(numbers)

    async def _in(self, reader: AIOKafkaConsumer, topic: str, partition: int,
                  correlation_id: bytes, from_ms: int) -> bool:
        async with contextlib.aclosing(read_since(reader, topic, partition, from_ms)) as records:
            async for r in records:
                if header(list(r.headers or ()), CORRELATION_ID) == correlation_id:
                    return True
        return False

    async def _partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic``, looked up again after ``PARTITIONS_TTL_S``
        (through an admin client of its own, which asks for that topic alone)."""
        now = asyncio.get_running_loop().time()
        kept = self._partition_lists.get(topic)
        if kept is not None and now - kept[0] < PARTITIONS_TTL_S:
            return kept[1]
        numbers = await partitions(self.kafka, topic)
        if len(self._partition_lists) >= PARTITIONS_HELD:
            self._partition_lists.clear()
        if numbers:  # a topic not there yet is asked about again
            self._partition_lists[topic] = (now, numbers)
        return numbers

    @contextlib.asynccontextmanager
    async def _reader(self) -> AsyncIterator[AIOKafkaConsumer]:
        """An idle consumer, or a new one; kept for the next lookup, paused (no fetch
        in the background), when this one ends well, else stopped (a fetch of it may
        still be under way)."""
        reader = self._idle.pop() if self._idle else await self._started(consumer(self.kafka))
        try:
            yield reader
        except BaseException:
            self._stop_later(reader.stop())
            raise
        if self._closed:
            self._stop_later(reader.stop())
        else:
            reader.pause(*reader.assignment())
            self._idle.append(reader)

    async def _started(self, reader: AIOKafkaConsumer) -> AIOKafkaConsumer:
        if self._closed:
            raise RuntimeError("the reply lookup is closed")
        self.clients_started += 1
        try:
            await reader.start()
        except BaseException:
            self._stop_later(reader.stop())
            raise
        return reader

    def _stop_later(self, stopping: Coroutine[Any, Any, None]) -> None:
        self._stopping.keep(stopping)
