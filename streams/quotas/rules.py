"""The token bucket of one tenant's quota: ``rate`` tokens come back every second,
at most ``burst`` are held; each request takes one, and a request finding less
than one is refused, with the time until one is back. Pure: the time is an
argument, and a clock going back refills nothing."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limit:
    """``rate`` requests a second, ``burst`` at once; a rate of 0 is no limit."""

    rate: float
    burst: float

    @property
    def unlimited(self) -> bool:
        return self.rate <= 0


@dataclass(frozen=True, slots=True)
class Bucket:
    """The tokens held at time ``at`` (seconds)."""

    tokens: float
    at: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the request may go on, the bucket after it, and — refused — how long
    until it would be allowed (seconds; 0 when allowed)."""

    allowed: bool
    bucket: Bucket
    retry_after_s: float = 0.0


def refilled(bucket: Bucket | None, limit: Limit, now: float) -> Bucket:
    """``bucket`` at ``now``: what came back since, up to ``burst``; a new bucket is
    full. A time before the bucket's own adds nothing and keeps its time."""
    if bucket is None:
        return Bucket(limit.burst, now)
    elapsed = max(0.0, now - bucket.at)
    return Bucket(min(limit.burst, bucket.tokens + elapsed * limit.rate), max(now, bucket.at))


def take(bucket: Bucket | None, limit: Limit, now: float, cost: float = 1.0) -> Verdict:
    """Take ``cost`` tokens at ``now`` when they are there; else refuse, taking nothing."""
    if limit.unlimited:
        return Verdict(True, Bucket(limit.burst, now))
    b = refilled(bucket, limit, now)
    if b.tokens >= cost:
        return Verdict(True, Bucket(b.tokens - cost, b.at))
    return Verdict(False, b, (cost - b.tokens) / limit.rate)


def given_back(bucket: Bucket | None, limit: Limit, now: float, cost: float = 1.0) -> Bucket:
    """``bucket`` at ``now`` with ``cost`` tokens returned (taken for a request not
    served after all), up to ``burst``."""
    b = refilled(bucket, limit, now)
    return b if limit.unlimited else Bucket(min(limit.burst, b.tokens + cost), b.at)


def peek(bucket: Bucket | None, limit: Limit, now: float, cost: float = 1.0) -> Verdict:
    """What :func:`take` would say, the bucket left as it is (only refilled)."""
    verdict = take(bucket, limit, now, cost)
    return Verdict(verdict.allowed, refilled(bucket, limit, now) if not limit.unlimited
                   else verdict.bucket, verdict.retry_after_s)
