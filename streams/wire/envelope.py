"""A record as read from a topic and a record to send, decoupled from any Kafka client;
what handling one consumed record produced (``ToSend`` or ``DeadLettered``); the
``Publisher`` every stage sends through."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from streams.wire.headers import Headers

TPKey = tuple[str, int]
"""(topic, partition): where a record was read."""


@dataclass(frozen=True)
class SourceRecord:
    """One consumed Kafka record.

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
    """One record to send; ``partition`` None lets the producer's partitioner choose."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    partition: int | None = None


@dataclass(frozen=True)
class ToSend:
    """Handling one record went through: what to send for it (a reply, a receipt, a
    forward; nothing when nothing is owed), and ``outcome``, a metric label saying
    what happened (``answered``, ``expired``, ``duplicate``, ``done`` ...)."""

    records: tuple[Outgoing, ...] = ()
    outcome: str = "done"


@dataclass(frozen=True)
class DeadLettered:
    """Handling one record failed for good: its dead letter, and ``reason`` (one of
    ``streams.wire.rejections`` or a stage's own, a metric label)."""

    dead_letter: Outgoing
    reason: str
    replies: tuple[Outgoing, ...] = ()
    """Sent all the same to whoever waits for an answer (a receipt saying why)."""


Handled = ToSend | DeadLettered
"""What a stage's processor returns for each record it consumed."""


class PublishFailed(Exception):
    """The broker did not take the records (unreachable, not leader, timed out): sending
    them again may succeed; those acknowledged before the failure may be sent twice."""


class Publisher(Protocol):
    """Sends records; every stage's outbox."""

    async def publish(self, records: Sequence[Outgoing]) -> None:
        """Deliver every record (acknowledged by the broker) or raise; a failure of
        the broker or of the way to it raises :class:`PublishFailed`."""
