"""Kafka record headers as memstream passes them: ``(name, value)`` pairs in
record order, a name possibly repeated. Names are text, values bytes.

Every header name memstream writes or reads is defined here, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

Header = tuple[str, bytes]
Headers = list[Header]

PREFIX: Final = "memstream."
"""Every header memstream writes on its own topics starts with this."""

# ── a dead letter: why it failed and where it was read ──────────────────────
STAGE: Final = "memstream.stage"
ERROR_REASON: Final = "memstream.error.reason"
ERROR_CLASS: Final = "memstream.error.class"
ERROR_MESSAGE: Final = "memstream.error.message"
SOURCE_TOPIC: Final = "memstream.source.topic"
SOURCE_PARTITION: Final = "memstream.source.partition"
SOURCE_OFFSET: Final = "memstream.source.offset"
SOURCE_PLACE: Final = (SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET)
SOURCE_TIMESTAMP: Final = "memstream.source.timestamp"
"""The source record's Kafka timestamp (milliseconds since the epoch), when known."""
FAILED_AT: Final = "memstream.failed_at"
DEAD_LETTER_OWN: Final = frozenset({STAGE, ERROR_REASON, ERROR_CLASS, ERROR_MESSAGE,
                                    *SOURCE_PLACE, SOURCE_TIMESTAMP, FAILED_AT})
"""The headers a dead letter sets itself (replacing any of the same name it carried)."""

# ── a re-driven dead letter ─────────────────────────────────────────────────
REPLAYED_FROM: Final = "memstream.replayed_from"
FIRST_READ: Final = ("memstream.first.topic", "memstream.first.partition",
                     "memstream.first.offset")
"""Where a re-driven record was first read: topic, partition, offset."""

# ── a record re-keyed by ingest, or a session end on the retry topic ────────
ORIGIN_PARTITION: Final = "memstream.origin.partition"
"""Where the record was first read (ingest's re-key; the retry topic's origin)."""
ORIGIN_OFFSET: Final = "memstream.origin.offset"
ORIGIN_TOPIC: Final = "memstream.origin.topic"
"""Set only when the origin is not on the session-closed topic: a record of the
retry topic that names no origin, copied back to it by a rebalance, names itself."""
ORIGIN_TIMESTAMP: Final = "memstream.origin.timestamp"
"""The origin's Kafka timestamp (milliseconds), so its dead letter names it."""
ATTEMPT: Final = "memstream.attempt"
NEXT_ATTEMPT_AT: Final = "memstream.next_attempt_at"
RETRY_REASON: Final = "memstream.retry.reason"
RETRY_OWN: Final = frozenset({ATTEMPT, NEXT_ATTEMPT_AT, RETRY_REASON, ORIGIN_PARTITION,
                              ORIGIN_OFFSET, ORIGIN_TOPIC, ORIGIN_TIMESTAMP})

# ── a query's reply ────────────────────────────────────────────────────────
ANSWERED_PARTITION: Final = "memstream.answered.partition"
"""The partition of the query topic the answered copy was read from (a hedged query
has two copies; the client tells which one won)."""

# ── the W3C trace context (https://www.w3.org/TR/trace-context/, W3C Baggage) ─
TRACEPARENT: Final = "traceparent"
TRACESTATE: Final = "tracestate"
BAGGAGE: Final = "baggage"
TRACE_HEADERS: Final = frozenset({TRACEPARENT, TRACESTATE, BAGGAGE})
"""Read from every record memstream consumes, written on every record it produces
(streams.tracing)."""

# ── a signed request (HMAC over the request, see streams.wire.signing) ──────
SIGNED_AT: Final = "memstream-timestamp"
SIGNATURE: Final = "memstream-signature"


def header(headers: Sequence[Header] | None, name: str) -> bytes | None:
    """The value of the first header called ``name``; None when there is none."""
    for k, v in headers or ():
        if k == name:
            return v
    return None
