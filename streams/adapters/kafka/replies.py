"""ReplyPublisher: the producer query replies go out on.

Replies use a producer of their own with no linger: the shared Faust producer
lingers a few milliseconds to batch changelog writes, which a caller waiting
for its reply would feel.
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaProducer

from streams.adapters.kafka.bootstrap import bootstrap_servers
from streams.adapters.kafka.security import PLAINTEXT, KafkaSecurity
from streams.backoff import Backoff
from streams.wire.envelope import Outgoing

log = logging.getLogger(__name__)


class ReplyPublisher:
    """Sends replies and dead letters; a failed send is retried a few times,
    then logged (the caller's own timeout reports it)."""

    def __init__(self, broker: str, attempts: int = 3, *, every_partition: bool = True,
                 send_timeout_s: float = 5.0, security: KafkaSecurity = PLAINTEXT) -> None:
        self._producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(broker),
                                          linger_ms=0, acks=1, **security.client_options())
        # a reply with no partition: one copy per partition of its topic (see
        # QuerySettings.unaddressed_replies), else the producer's choice by key
        self.every_partition = every_partition
        self._started = False
        self._lock = asyncio.Lock()
        self.attempts = attempts
        # all attempts of one reply together: a topic that does not exist would
        # otherwise hold the sender for the producer's metadata wait, per attempt
        self.send_timeout_s = send_timeout_s
        self.backoff = Backoff(0.05)  # 0.05 s, then 0.1 s between the three attempts

    async def start(self) -> None:
        async with self._lock:
            if not self._started:
                await self._producer.start()
                self._started = True

    async def stop(self) -> None:
        """Close the producer — also one whose start failed half-way, which may hold
        connections already (closing is idempotent)."""
        await self._producer.stop()
        self._started = False

    async def deliver(self, r: Outgoing) -> bool:
        """Send one reply; True once the broker acknowledged it (every copy), False
        when it could not be sent within ``send_timeout_s``."""
        await self.start()
        try:
            async with asyncio.timeout(self.send_timeout_s):
                return await self._attempts(r)
        except TimeoutError:
            log.error("reply to %s not sent within %.1fs (does the topic exist?)",
                      r.topic, self.send_timeout_s)
            return False

    async def _attempts(self, r: Outgoing) -> bool:
        for attempt in range(1, self.attempts + 1):
            try:
                if r.partition is None and self.every_partition:
                    parts = await self._producer.partitions_for(r.topic)
                    await asyncio.gather(*[
                        self._producer.send_and_wait(r.topic, r.value, key=r.key, partition=p,
                                                     headers=r.headers or None)
                        for p in sorted(parts)])
                else:
                    await self._producer.send_and_wait(
                        r.topic, r.value, key=r.key, partition=r.partition,
                        headers=r.headers or None)
                return True
            except Exception as exc:
                if attempt == self.attempts:
                    log.error("reply to %s lost after %d attempts: %s", r.topic, attempt, exc)
                else:
                    await asyncio.sleep(self.backoff.delay(attempt))
        return False
