"""The compacted ``memory.agent-config`` topic followed by a plain consumer: the agent
configurations of a process that runs no Faust app (the query process).

:meth:`AgentConfigFollower.start` reads the topic to its end before it returns, so
the first lookup sees every configuration written before the process started; a
task then keeps reading, and a value produced later reaches the mapping within a
poll (``POLL_MS``); a topic that does not exist yet is found within
``METADATA_MS`` of its creation. A tombstone removes its key. A failure to read
leaves the mapping as it was, and is retried every ``RETRY_S``. The mapping is read with
``get`` as the worker's global table is (:class:`~streams.memory.agent_configs.
TableAgentConfigs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from aiokafka import TopicPartition

from streams.adapters.kafka.clients import consumer, partitions
from streams.settings import KafkaSettings

log = logging.getLogger(__name__)
POLL_MS = 500
RETRY_S = 1.0
METADATA_MS = 5_000


class AgentConfigFollower:
    """Every key's newest value of the agent-config topic, kept current."""

    def __init__(self, k: KafkaSettings) -> None:
        self._k = k
        self._values: dict[bytes, bytes] = {}
        self._consumer: Any = None
        self._task: asyncio.Task[None] | None = None

    def get(self, key: bytes | str) -> bytes | None:
        return self._values.get(key.encode() if isinstance(key, str) else key)

    def __len__(self) -> int:
        return len(self._values)

    async def start(self, *, timeout_s: float = 30.0) -> None:
        """Read the topic to its current end (``TimeoutError`` past ``timeout_s``),
        then follow it; a start that fails leaves nothing open."""
        topic = self._k.agent_config_topic
        tps = [TopicPartition(topic, p) for p in await partitions(self._k, topic)]
        # a topic created later is seen within METADATA_MS (aiokafka's default: 5 min)
        self._consumer = c = consumer(self._k, metadata_max_age_ms=METADATA_MS)
        try:
            await c.start()
            if not tps:  # no topic yet: nothing configured; follow it once it exists
                c.subscribe([topic])
            else:
                c.assign(tps)
                await c.seek_to_beginning(*tps)
                ends = await c.end_offsets(tps)
                deadline = time.monotonic() + timeout_s
                while any([await c.position(tp) < ends[tp] for tp in tps]):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"could not read {topic} to its end")
                    self._take(await c.getmany(*tps, timeout_ms=POLL_MS))
        except BaseException:
            await self.stop()
            raise
        self._task = asyncio.get_running_loop().create_task(self._follow())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    def _take(self, batch: dict[Any, list[Any]]) -> None:
        for records in batch.values():
            for r in records:
                if r.key is None:
                    continue
                if r.value is None:
                    self._values.pop(r.key, None)
                else:
                    self._values[r.key] = r.value

    async def _follow(self) -> None:
        while True:
            try:
                self._take(await self._consumer.getmany(timeout_ms=POLL_MS))
            except Exception as exc:  # the broker away: the mapping stays as it was
                log.warning("following %s: %s: %s", self._k.agent_config_topic,
                            type(exc).__name__, exc)
                await asyncio.sleep(RETRY_S)
