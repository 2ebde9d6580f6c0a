"""The publisher over a Kafka producer: delivers records before a batch is acknowledged."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka.errors import KafkaError

from streams.wire.envelope import Outgoing, PublishFailed

SendFn = Callable[..., Awaitable[Awaitable[Any]]]


class ProducerPublisher:
    """``streams.wire.envelope.Publisher`` over a producer whose ``send`` returns a
    delivery future."""

    def __init__(self, send: SendFn) -> None:
        self._send = send

    async def publish(self, records: Sequence[Outgoing]) -> None:
        if not records:
            return
        try:
            futures = [
                await self._send(r.topic, r.key, r.value, r.partition, None, r.headers or None)
                for r in records
            ]
            await asyncio.gather(*futures)
        except KafkaError as exc:
            raise PublishFailed(f"{type(exc).__name__}: {exc}") from exc
