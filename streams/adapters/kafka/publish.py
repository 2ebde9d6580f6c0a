"""Outgoing records and the publisher that delivers them before a batch is acknowledged."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from streams.redaction import redacted
from streams.wire.headers import Headers

TPKey = tuple[str, int]  # (topic, partition): where a record was read


@dataclass(frozen=True)
class SourceRecord:
    """One consumed Kafka record, decoupled from the consumer library.

    ``handle`` is the consumer's own event object, kept opaque so that state
    writes can run in that event's context.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    timestamp: float | None = None
    handle: Any = None


@dataclass(frozen=True)
class Outgoing:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    partition: int | None = None


class Publisher(Protocol):
    async def publish(self, records: Sequence[Outgoing]) -> None:
        """Deliver every record (acknowledged by the broker) or raise."""


SendFn = Callable[..., Awaitable[Awaitable[Any]]]


class ProducerPublisher:
    """Publisher over a producer whose ``send`` returns a delivery future."""

    def __init__(self, send: SendFn) -> None:
        self._send = send

    async def publish(self, records: Sequence[Outgoing]) -> None:
        if not records:
            return
        futures = [
            await self._send(r.topic, r.key, r.value, r.partition, None, r.headers or None)
            for r in records
        ]
        await asyncio.gather(*futures)


def dead_letter(
    record: SourceRecord,
    *,
    dlq_topic: str,
    stage: str,
    reason: str,
    error_class: str,
    message: str,
    now: datetime | None = None,
    extra: Headers | None = None,
) -> Outgoing:
    """The original key and bytes, with headers saying where they came from and why they failed."""
    when = (now or datetime.now(UTC)).isoformat()
    own = {
        "memstream.stage", "memstream.error.reason", "memstream.error.class",
        "memstream.error.message",
        "memstream.source.topic", "memstream.source.partition", "memstream.source.offset",
        "memstream.failed_at",
    }
    kept = [(k, v) for k, v in record.headers if k not in own]
    headers: Headers = [
        *kept,
        ("memstream.stage", stage.encode()),
        ("memstream.error.reason", reason.encode()),
        ("memstream.error.class", error_class.encode()),
        ("memstream.error.message", redacted(message)[:1000].encode("utf-8", "replace")),
        ("memstream.source.topic", record.topic.encode()),
        ("memstream.source.partition", str(record.partition).encode()),
        ("memstream.source.offset", str(record.offset).encode()),
        ("memstream.failed_at", when.encode()),
        *(extra or []),
    ]
    return Outgoing(dlq_topic, record.key, record.value, headers)
