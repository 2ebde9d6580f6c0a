"""When a request's caller has given up: the request is then not answered.

A caller waits ``options.timeout_ms`` for its reply (``streams/wire/query.py``).
A request taken by a worker later than that after it was produced — the record's
timestamp, set by the producer (``CreateTime``) or the broker
(``LogAppendTime``) — would be answered into the void, or worse, after the
caller retried: it is counted and skipped instead. Records without a
timestamp never expire. Producer and worker clocks are compared, so they must
agree (NTP); a skew adds to or takes from every caller's wait.
"""

from __future__ import annotations

from streams.wire.query import MAX_TIMEOUT_MS


def caller_gave_up(produced_at_s: float | None, now_s: float, timeout_ms: int) -> bool:
    """True when more than ``timeout_ms`` passed between ``produced_at_s`` and ``now_s``."""
    if produced_at_s is None or produced_at_s <= 0:
        return False
    return (now_s - produced_at_s) * 1000.0 > timeout_ms


def beyond_any_timeout(produced_at_s: float | None, now_s: float) -> bool:
    """True when no caller can still be waiting, whatever timeout it asked for: such a
    record is skipped without being read."""
    return caller_gave_up(produced_at_s, now_s, MAX_TIMEOUT_MS)
