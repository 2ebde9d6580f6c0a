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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from streams.adapters.kafka.clients import partitions, records_since
from streams.settings import KafkaSettings
from streams.wire.headers import header
from streams.wire.spring_reply import CORRELATION_ID

log = logging.getLogger(__name__)

AT_ONCE = 4  # lookups in flight: a takeover may bring a killed worker's every request


class ReplyLookup:
    def __init__(self, kafka: KafkaSettings, *, every_partition: bool = True,
                 timeout_s: float = 5.0, margin_s: float = 5.0) -> None:
        self.kafka = kafka
        self.every_partition = every_partition
        self.timeout_s = timeout_s
        self.margin_s = margin_s
        self._at_once = asyncio.Semaphore(AT_ONCE)

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

    async def _scan(self, topic: str, correlation_id: bytes, from_ms: int,
                    partition: int | None) -> bool:
        if partition is not None:
            numbers = [partition]
        else:
            numbers = await partitions(self.kafka, topic)
        every = partition is None and self.every_partition
        for number in numbers:
            there = await self._in(topic, number, correlation_id, from_ms)
            if there != every:  # one copy is enough, or one is missing (sent again, to all)
                return there
        return every and bool(numbers)

    async def _in(self, topic: str, partition: int, correlation_id: bytes,
                  from_ms: int) -> bool:
        async with contextlib.aclosing(
                records_since(self.kafka, topic, partition, from_ms)) as records:
            async for r in records:
                if header(list(r.headers or ()), CORRELATION_ID) == correlation_id:
                    return True
        return False
