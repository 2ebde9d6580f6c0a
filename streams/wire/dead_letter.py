"""The one dead-letter builder: the original key and bytes, with headers saying
where they came from and why they failed (``docs/events.md``, "Dead letters")."""

from __future__ import annotations

from datetime import UTC, datetime

from streams.redaction import redacted
from streams.wire import headers as h
from streams.wire.envelope import Outgoing, SourceRecord
from streams.wire.headers import Headers

MESSAGE_LIMIT = 1000
"""Characters of the (redacted) error message kept in ``memstream.error.message``."""


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
    """``record`` as a dead letter: its own headers (but those a dead letter sets),
    the stage, the reason, the error class and message, its place (and timestamp, when
    known), the time, ``extra``."""
    when = (now or datetime.now(UTC)).isoformat()
    kept = [(k, v) for k, v in record.headers if k not in h.DEAD_LETTER_OWN]
    headers: Headers = [
        *kept,
        (h.STAGE, stage.encode()),
        (h.ERROR_REASON, reason.encode()),
        (h.ERROR_CLASS, error_class.encode()),
        (h.ERROR_MESSAGE, redacted(message)[:MESSAGE_LIMIT].encode("utf-8", "replace")),
        (h.SOURCE_TOPIC, record.topic.encode()),
        (h.SOURCE_PARTITION, str(record.partition).encode()),
        (h.SOURCE_OFFSET, str(record.offset).encode()),
        *([] if record.timestamp is None else
          [(h.SOURCE_TIMESTAMP, str(round(record.timestamp * 1000)).encode())]),
        (h.FAILED_AT, when.encode()),
        *(extra or []),
    ]
    return Outgoing(dlq_topic, record.key, record.value, headers)
