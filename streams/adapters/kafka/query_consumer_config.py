"""The query consumer's configuration, the aiokafka consumer it describes, and
that consumer's records as :class:`~streams.wire.envelope.SourceRecord`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer

from streams.adapters.kafka.bootstrap import bootstrap_servers
from streams.adapters.kafka.security import PLAINTEXT, KafkaSecurity
from streams.wire.envelope import SourceRecord


@dataclass(frozen=True)
class QueryConsumerConfig:
    broker: str
    topic: str
    group_id: str
    client_id: str
    session_timeout_s: float = 10.0
    heartbeat_interval_s: float = 1.0
    instance_id: str | None = None
    concurrency: int = 16
    read_ahead: int = 0  # requests queued beyond the free slots (0: none)
    read_ahead_bytes: int = 0  # and at most these bytes of one tenant's share (0: no bound)
    drain_timeout_s: float = 3.0
    settling_max: int = 256  # answered requests finishing outside the slots, room aside
    contended_slots: int = 0  # slots of one tenant while the process is busy (0: no bound)
    security: KafkaSecurity = PLAINTEXT


def kafka_consumer(c: QueryConsumerConfig) -> Any:
    """The aiokafka consumer (not started). Rebalance timeout: the session timeout plus
    the drain, so a member that drains is never dropped from the group for it. A group
    with no committed offset starts at the earliest request: none is lost, and those
    older than any timeout are skipped unread."""
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers(c.broker), group_id=c.group_id,
        client_id=c.client_id, group_instance_id=c.instance_id, enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=int(c.session_timeout_s * 1000),
        heartbeat_interval_ms=int(c.heartbeat_interval_s * 1000),
        rebalance_timeout_ms=int((c.session_timeout_s + c.drain_timeout_s) * 1000),
        max_poll_records=c.concurrency, **c.security.client_options(),
    )


def from_consumer_record(r: Any) -> SourceRecord:
    """An aiokafka ``ConsumerRecord`` (timestamp in milliseconds)."""
    ts = r.timestamp
    return SourceRecord(topic=r.topic, partition=r.partition, offset=r.offset, key=r.key,
                        value=r.value, headers=[(str(k), bytes(v or b"")) for k, v in r.headers],
                        timestamp=ts / 1000 if ts is not None and ts >= 0 else None)
