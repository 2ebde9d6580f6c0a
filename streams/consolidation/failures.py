"""What happens to a closing event whose consolidation failed.

:func:`classify` sorts a failure into one of three kinds:

``infrastructure``
    the database (or the network to it) is down — a *transient* database error, as
    the ``is_transient`` the router is built with says (the composition root gives
    it the database adapter's classification) — or a cube's lock was lost with its
    connection (:class:`~streams.memory.cube_locks.CubeLockLost`).
    Nothing can progress, and the retry
    topic would not help: the processor retries in place, with backoff, and does
    not acknowledge the event meanwhile (as the ingest agent does);
``requeue``
    a cube's lock was not got in time
    (:class:`~streams.memory.cube_locks.CubeLockTimeout`: another run holds the
    cube, perhaps for long): the event goes to ``memory.retry`` due after the
    backoff of its attempt, its attempt count unchanged (waiting for a cube is
    not a failure of the event, and never dead-letters it), and the run waits
    for nothing meanwhile;
``retry``
    a provider timed out, was rate limited or failed with 5xx after the
    client's own retries, or something unexpected went wrong (a database error
    the data itself causes included, so it is never waited out for ever): the event goes
    to ``memory.retry`` with ``memstream.attempt`` and
    ``memstream.next_attempt_at``, until ``max_attempts`` (the first attempt
    included) are used up; then to ``memory.dlq``;
``dead``
    trying again cannot help (the provider rejected the request, no provider
    is configured under the agent's route, the record cannot be decoded): the
    event goes straight to ``memory.dlq``.

Dead letters carry the closing event's original key and bytes and name the
session-closed topic as their source (and its timestamp there, which retry
records carry as ``memstream.origin.timestamp``), whether they failed there or on the
retry topic, so ``memstream replay`` re-drives them to the consolidation agent.

The retry headers are read leniently and never raise: an unreadable
``memstream.attempt`` counts as attempt 1, an unreadable
``memstream.next_attempt_at`` as due now (the scheduler also waits no longer
than the longest backoff, whatever the header says).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from streams.backoff import Backoff
from streams.clock import aware_utc
from streams.memory.cube_locks import CubeLockError, CubeLockTimeout
from streams.memory.provider import PermanentProviderError, RetryableProviderError
from streams.memory.registry import ProviderNotConfigured
from streams.redaction import redacted
from streams.wire.dead_letter import dead_letter
from streams.wire.envelope import Outgoing, SourceRecord
from streams.wire.headers import (
    ATTEMPT,
    NEXT_ATTEMPT_AT,
    ORIGIN_OFFSET,
    ORIGIN_PARTITION,
    ORIGIN_TIMESTAMP,
    ORIGIN_TOPIC,
    RETRY_OWN,
    RETRY_REASON,
    Headers,
    header,
)

_OWN = RETRY_OWN


def _stamped(timestamp: float | None) -> Headers:
    """The origin's timestamp header (milliseconds), none when it is unknown."""
    return [] if timestamp is None else [(ORIGIN_TIMESTAMP, str(round(timestamp * 1000)).encode())]

FailureKind = Literal["infrastructure", "requeue", "retry", "dead"]
IsTransient = Callable[[BaseException], bool]
"""Whether an error is a database outage (every write fails now), not this event's."""


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    reason: str
    error_class: str
    message: str


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def classify(exc: BaseException, is_transient: IsTransient) -> Failure:
    """A database error is ``infrastructure`` only when ``is_transient`` says so: an
    error the data will always get goes through the retry topic, whose attempts are
    bounded, instead of being waited out for ever."""
    name, text = type(exc).__name__, redacted(str(exc))
    if isinstance(exc, CubeLockTimeout):
        return Failure("requeue", "cube_lock_timeout", name, text)
    if isinstance(exc, CubeLockError):
        return Failure("infrastructure", "cube_lock_lost", name, text)
    if is_transient(exc):
        return Failure("infrastructure", "database_unavailable", name, text)
    if isinstance(exc, ProviderNotConfigured):
        return Failure("dead", "provider_not_configured", name, text)
    if isinstance(exc, PermanentProviderError):
        return Failure("dead", "provider_rejected", name, text)
    if isinstance(exc, RetryableProviderError):
        return Failure("retry", _snake(name), name, text)
    return Failure("retry", "internal_error", name, text)


def _int(raw: bytes | None) -> int:
    try:
        return int(raw) if raw else -1
    except ValueError:
        return -1


def attempt_of(record: SourceRecord) -> int:
    """The attempt this record is (1 when it carries no readable attempt header)."""
    raw = header(record.headers, ATTEMPT)
    try:
        return max(1, int(raw)) if raw else 1
    except ValueError:  # not a number, or more than 4,300 digits
        return 1


def due_at(record: SourceRecord) -> float:
    """Unix time the record's next attempt is due (0: now, also when the header is
    unreadable; a time without offset is UTC). Never raises."""
    raw = header(record.headers, NEXT_ATTEMPT_AT)
    if not raw:
        return 0.0
    try:
        when = datetime.fromisoformat(raw.decode())
        return aware_utc(when).timestamp()
    except (ValueError, OverflowError, OSError):
        return 0.0


class FailureRouter:
    """Classifies a failed closing event (:meth:`classify`) and builds its retry or
    dead-letter record."""

    def __init__(self, *, source_topic: str, retry_topic: str, dlq_topic: str,
                 max_attempts: int, initial_s: float, max_s: float, is_transient: IsTransient,
                 clock: Callable[[], float] = time.time,
                 rng: Callable[[], float] = random.random) -> None:
        self.is_transient = is_transient
        self.source_topic = source_topic
        self.retry_topic = retry_topic
        self.dlq_topic = dlq_topic
        self.max_attempts = max_attempts
        self.backoff = Backoff(initial_s, max_s, jitter="half")
        self.clock = clock
        self.rng = rng

    def classify(self, exc: BaseException) -> Failure:
        """:func:`classify` with the router's ``is_transient``."""
        return classify(exc, self.is_transient)

    def delay(self, attempt: int) -> float:
        """Wait before attempt ``attempt + 1``: ``initial_s`` doubling up to ``max_s``,
        upper-half jitter."""
        return self.backoff.delay(attempt, self.rng)

    def _origin(self, record: SourceRecord) -> SourceRecord:
        """The record as it was on the session-closed topic (without retry headers);
        a retry record that names no origin (memstream did not write it) as it was read."""
        kept = [(k, v) for k, v in record.headers if k not in _OWN]
        part, off = header(record.headers, ORIGIN_PARTITION), header(record.headers, ORIGIN_OFFSET)
        if record.topic == self.source_topic or part is None or off is None:
            return SourceRecord(record.topic, record.partition, record.offset, record.key,
                                record.value, kept, record.timestamp, record.handle)
        named = header(record.headers, ORIGIN_TOPIC)
        topic = self.source_topic if named is None else named.decode("utf-8", "replace")
        stamp = _int(header(record.headers, ORIGIN_TIMESTAMP))  # unknown: -1, not the copy's
        return SourceRecord(topic, _int(part), _int(off), record.key, record.value, kept,
                            stamp / 1000 if stamp >= 0 else None, record.handle)

    def reject(self, record: SourceRecord, reason: str, error_class: str,
               message: str) -> Outgoing:
        """The dead letter of a record that cannot be used at all (it does not decode)."""
        return dead_letter(self._origin(record), dlq_topic=self.dlq_topic, stage="consolidation",
                           reason=reason, error_class=error_class, message=message)

    def route(self, record: SourceRecord, failure: Failure) -> Outgoing:
        """The retry record of ``record`` (its next attempt, or for a ``requeue`` the
        same attempt again), or its dead letter when trying again cannot help or
        its attempts are used up."""
        attempt = attempt_of(record)
        if failure.kind == "requeue":
            return self._retry(record, failure, attempt, attempt)
        if failure.kind == "dead" or attempt >= self.max_attempts:
            reason = failure.reason if failure.kind == "dead" else "retries_exhausted"
            return dead_letter(
                self._origin(record), dlq_topic=self.dlq_topic, stage="consolidation",
                reason=reason, error_class=failure.error_class, message=failure.message,
                extra=[(ATTEMPT, str(attempt).encode())])
        return self._retry(record, failure, attempt, attempt + 1)

    def _retry(self, record: SourceRecord, failure: Failure, attempt: int,
               then: int) -> Outgoing:
        """``record`` for the retry topic as attempt ``then``, due after the backoff of
        ``attempt``."""
        origin = self._origin(record)
        when = datetime.fromtimestamp(self.clock() + self.delay(attempt), UTC)
        kept: Headers = [(k, v) for k, v in record.headers if k not in _OWN]
        return Outgoing(self.retry_topic, record.key, record.value, [
            *kept,
            (ATTEMPT, str(then).encode()),
            (NEXT_ATTEMPT_AT, when.isoformat().encode()),
            (RETRY_REASON, failure.reason.encode()),
            (ORIGIN_PARTITION, str(origin.partition).encode()),
            (ORIGIN_OFFSET, str(origin.offset).encode()),
            *_stamped(origin.timestamp),
        ])
