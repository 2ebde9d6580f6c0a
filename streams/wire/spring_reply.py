"""Request/reply headers compatible with Spring Kafka's ReplyingKafkaTemplate.

A Spring upstream sends a request with ``kafka_replyTopic`` (the reply topic
name, UTF-8 bytes), ``kafka_correlationId`` (opaque bytes) and optionally
``kafka_replyPartition`` (a 4-byte big-endian int). The reply goes to that
topic (and partition) carrying the correlation id unchanged, so the template
matches it with no adapter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from streams.wire.headers import Header, Headers, header

REPLY_TOPIC = "kafka_replyTopic"
CORRELATION_ID = "kafka_correlationId"
REPLY_PARTITION = "kafka_replyPartition"
CONTENT_TYPE = "contentType"  # Spring's MessageHeaders.CONTENT_TYPE
JSON = b"application/json"

# Kafka's own rule for topic names
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class BadReplyHeaders(ValueError):
    pass


@dataclass(frozen=True)
class ReplyAddress:
    topic: str
    correlation_id: bytes | None
    partition: int | None = None

    def headers(self) -> Headers:
        """The reply's headers: its content type (Spring's message converters and
        ``JsonDeserializer`` read it) and the correlation id, as sent."""
        out: Headers = [(CONTENT_TYPE, JSON)]
        if self.correlation_id is not None:
            out.append((CORRELATION_ID, self.correlation_id))
        return out


def reply_address(headers: Sequence[Header]) -> ReplyAddress | None:
    """Where to reply; None when the request names no reply topic.

    Raises :class:`BadReplyHeaders` when a reply topic is named but unusable
    (not UTF-8, empty, not a legal topic name) or the partition is not a 4-byte
    big-endian int.
    """
    raw_topic = header(headers, REPLY_TOPIC)
    if raw_topic is None:
        return None
    try:
        topic = raw_topic.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise BadReplyHeaders("kafka_replyTopic is not UTF-8") from exc
    if not topic:
        raise BadReplyHeaders("kafka_replyTopic is empty")
    if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise BadReplyHeaders("kafka_replyTopic is not a legal Kafka topic name")
    raw_partition = header(headers, REPLY_PARTITION)
    partition = None
    if raw_partition is not None:
        if len(raw_partition) != 4:
            raise BadReplyHeaders("kafka_replyPartition must be a 4-byte big-endian int")
        partition = int.from_bytes(raw_partition, "big", signed=True)
        if partition < 0:
            raise BadReplyHeaders("kafka_replyPartition is negative")
    return ReplyAddress(topic, header(headers, CORRELATION_ID), partition)


def request_headers(
    reply_topic: str, correlation_id: bytes, partition: int | None = None
) -> Headers:
    out = [(REPLY_TOPIC, reply_topic.encode()), (CORRELATION_ID, correlation_id)]
    if partition is not None:
        out.append((REPLY_PARTITION, partition.to_bytes(4, "big", signed=True)))
    return out
