"""The standby reader: every partition of ``memory.queries`` read outside the query
group, from its end, each request offered to the worker's
:class:`~streams.query.rescue.Rescuer`.

It belongs to no consumer group, so nothing that stops the group — a member
that died and holds its partitions until its session times out, a rebalance
waiting for a member that does not rejoin — stops it. It commits nothing and
starts at the end: it sees the requests produced while it runs, which is all a
caller with a deadline can still be waiting for. A request is small; reading
every one on every worker costs each worker the whole request stream's bytes
(the answers stay with the owners, see :mod:`streams.query.rescue`).

The partitions are found by ``find_partitions``; new ones are picked up within
``refresh_s``. A failure of the
broker is waited out (``RETRY_S``) and never stops the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.adapters.kafka.bootstrap import bootstrap_servers
from streams.adapters.kafka.query_consumer_config import QueryConsumerConfig, from_consumer_record
from streams.wire.envelope import SourceRecord

log = logging.getLogger(__name__)

RETRY_S = 1.0
# the broker gathers requests for up to FETCH_WAIT_MS (or FETCH_MIN_BYTES of them)
# before it answers a fetch: the reader asks at most ten times a second whatever the
# request rate, and sees a request at most that late — well before any take-over
FETCH_WAIT_MS = 100
FETCH_MIN_BYTES = 64 * 1024


def standby_consumer(c: QueryConsumerConfig) -> Any:
    """An aiokafka consumer in no group (not started): nothing committed, nothing joined."""
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers(c.broker), group_id=None,
        client_id=f"{c.client_id}.standby", enable_auto_commit=False,
        auto_offset_reset="latest", fetch_max_wait_ms=FETCH_WAIT_MS,
        fetch_min_bytes=FETCH_MIN_BYTES,
        **c.security.client_options(),
    )


class QueryStandby:
    def __init__(self, config: QueryConsumerConfig,
                 find_partitions: Callable[[], Awaitable[list[int]]], *,
                 refresh_s: float = 30.0,
                 connect: Callable[[QueryConsumerConfig], Any] = standby_consumer,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._find_partitions = find_partitions
        self.refresh_s = refresh_s
        self._connect = connect
        self._clock = clock
        self._offer: Callable[[SourceRecord], None] | None = None
        self._running: asyncio.Task[None] | None = None
        self._partitions: set[int] = set()

    def start(self, offer: Callable[[SourceRecord], None]) -> None:
        """Read in the background until :meth:`stop`; ``offer`` never raises."""
        if self._running is None:
            self._offer = offer
            self._running = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._running is not None:
            self._running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._running
            self._running = None

    def partitions(self) -> list[int]:
        """The partitions read (for the health page)."""
        return sorted(self._partitions)

    async def _run(self) -> None:
        while True:
            consumer = self._connect(self.config)
            try:
                await consumer.start()
                await self._read(consumer)
            except Exception as exc:  # the reader must go on: it never stops the worker
                log.warning("query standby reader failed, restarting: %s: %s",
                            type(exc).__name__, exc)
            finally:
                self._partitions = set()
                with contextlib.suppress(Exception):
                    await consumer.stop()
            await asyncio.sleep(RETRY_S)

    async def _read(self, consumer: Any) -> None:
        assert self._offer is not None
        checked = -float("inf")
        while True:
            if self._clock() - checked >= self.refresh_s or not self._partitions:
                await self._assign(consumer)
                checked = self._clock()
            if not self._partitions:
                await asyncio.sleep(RETRY_S)
                continue
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for r in records:
                    self._offer(from_consumer_record(r))

    async def _assign(self, consumer: Any) -> None:
        """Every partition of the topic; the new ones read from their end."""
        topic = self.config.topic
        parts = set(await self._find_partitions())
        if parts == self._partitions:
            return
        new = [TopicPartition(topic, p) for p in sorted(parts - self._partitions)]
        consumer.assign([TopicPartition(topic, p) for p in sorted(parts)])
        if new:
            await consumer.seek_to_end(*new)
        self._partitions = parts
        log.info("query standby reader on %d partitions of %s", len(parts), topic)
