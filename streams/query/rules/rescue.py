"""When a request its partition's owner has not begun is taken over by another
worker (:mod:`streams.query.rescue`).

A request normally begins within milliseconds of being produced. One its owner
has not begun ``after_s`` later — or by ``share`` of its caller's wait, if that
is sooner — sits on a partition whose owner is dead, frozen, or caught in a
rebalance of the query group; another worker answers it while its caller still
waits. A request without a timestamp, or with one so old that the take-over
would come after its caller gave up, is never taken over.
"""

from __future__ import annotations

from streams.wire.json_doc import load_object
from streams.wire.query import MAX_TIMEOUT_MS

DEFAULT_TIMEOUT_MS = 1000
MIN_TIMEOUT_MS = 10


def caller_wait_ms(value: bytes | None) -> int:
    """The wait the request asks for (``options.timeout_ms``), read without validating the
    rest: the default when it is missing or not a usable number."""
    doc = load_object(value)
    options = doc.get("options") if isinstance(doc, dict) else None
    wait = options.get("timeout_ms") if isinstance(options, dict) else None
    if isinstance(wait, bool) or not isinstance(wait, int):
        return DEFAULT_TIMEOUT_MS
    return min(MAX_TIMEOUT_MS, max(MIN_TIMEOUT_MS, wait))


def take_over_at(produced_at_s: float | None, wait_ms: int, *, after_s: float,
                 share: float) -> float | None:
    """When (epoch seconds) a request produced at ``produced_at_s``, whose caller waits
    ``wait_ms``, is taken over if its owner has not begun it; None: never."""
    if produced_at_s is None or produced_at_s <= 0:
        return None
    return produced_at_s + min(after_s, share * wait_ms / 1000.0)


READER_LAG_S = 0.1  # how late the standby reader sees a request (its fetch wait)


def due_at(produced_at_s: float | None, received_at_s: float, wait_ms: int, *,
           after_s: float, share: float, lag_s: float = READER_LAG_S) -> float | None:
    """When a request read at ``received_at_s`` is taken over: at :func:`take_over_at`,
    but not sooner than that delay after it was read (less the reader's own lag) — a
    producer's clock behind this one does not make every request due at once — nor
    later than ``after_s`` after it was read (one ahead is looked at as if produced
    now); None: never."""
    at = take_over_at(produced_at_s, wait_ms, after_s=after_s, share=share)
    if at is None:
        return None
    delay = min(after_s, share * wait_ms / 1000.0)
    return min(max(at, received_at_s + delay - lag_s), received_at_s + after_s)


def caller_gone_at(produced_at_s: float, received_at_s: float, wait_ms: int) -> float:
    """Until when a request's caller may still wait for it: its wait after it was
    produced, or after it was read if that clock is behind (epoch seconds)."""
    return max(produced_at_s, received_at_s - READER_LAG_S) + wait_ms / 1000.0


IN_FLIGHT_MAX_S = 1.0


def in_flight_until(began_ms: int, wait_ms: int, *, share: float,
                    max_s: float = IN_FLIGHT_MAX_S) -> float:
    """Until when (epoch seconds) an attempt begun at ``began_ms`` by another worker (one
    that took the request over, or the owner of a hedged copy) is waited for before the
    request is answered here too: ``share`` of the caller's wait after it began, at most
    ``max_s``. An attempt that has recorded no answer by then has died or hangs."""
    return began_ms / 1000.0 + min(max_s, share * wait_ms / 1000.0)
