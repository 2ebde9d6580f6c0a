"""The token bucket: what comes back, what is taken, when to retry; time is an argument."""

from __future__ import annotations

import pytest

from streams.quotas.rules import Bucket, Limit, given_back, peek, refilled, take

FIVE = Limit(rate=5.0, burst=10.0)


@pytest.mark.parametrize(("bucket", "now", "tokens", "at"), [
    (None, 100.0, 10.0, 100.0),                     # a new bucket is full
    (Bucket(0.0, 100.0), 100.0, 0.0, 100.0),        # nothing has come back yet
    (Bucket(0.0, 100.0), 100.5, 2.5, 100.5),        # 5 a second
    (Bucket(4.0, 100.0), 110.0, 10.0, 110.0),       # never above the burst
    (Bucket(3.0, 100.0), 99.0, 3.0, 100.0),         # a clock going back adds nothing
])
def test_refilled(bucket: Bucket | None, now: float, tokens: float, at: float) -> None:
    assert refilled(bucket, FIVE, now) == Bucket(tokens, at)


@pytest.mark.parametrize(("bucket", "now", "allowed", "left", "retry_after_s"), [
    (None, 0.0, True, 9.0, 0.0),
    (Bucket(1.0, 0.0), 0.0, True, 0.0, 0.0),
    (Bucket(0.0, 0.0), 0.0, False, 0.0, 0.2),       # one token back in 1/5 s
    (Bucket(0.5, 0.0), 0.0, False, 0.5, 0.1),
    (Bucket(0.0, 0.0), 0.1, False, 0.5, 0.1),
    (Bucket(0.0, 0.0), 0.2, True, 0.0, 0.0),
])
def test_take(bucket: Bucket | None, now: float, allowed: bool, left: float,
              retry_after_s: float) -> None:
    verdict = take(bucket, FIVE, now)
    assert verdict.allowed is allowed
    assert verdict.bucket.tokens == pytest.approx(left)
    assert verdict.retry_after_s == pytest.approx(retry_after_s)


def test_a_burst_then_the_rate() -> None:
    bucket, allowed = None, []
    for i in range(40):  # 20 a second for 2 s against 5 a second, 10 at once
        verdict = take(bucket, FIVE, i * 0.05)
        bucket = verdict.bucket
        allowed.append(verdict.allowed)
    assert sum(allowed) == 10 + 9  # the burst, then ~5 a second over the 1.95 s
    assert all(allowed[:10])


def test_no_limit() -> None:
    off = Limit(rate=0.0, burst=1.0)
    assert all(take(Bucket(0.0, 0.0), off, 0.0).allowed for _ in range(3))
    assert peek(Bucket(0.0, 0.0), off, 0.0).allowed


@pytest.mark.parametrize(("bucket", "allowed"), [
    (None, True), (Bucket(1.0, 0.0), True), (Bucket(0.2, 0.0), False)])
def test_peek_takes_nothing(bucket: Bucket | None, allowed: bool) -> None:
    verdict = peek(bucket, FIVE, 0.0)
    assert verdict.allowed is allowed
    assert verdict.bucket == refilled(bucket, FIVE, 0.0)


@pytest.mark.parametrize(("bucket", "now", "tokens", "at"), [
    (Bucket(0.0, 100.0), 100.0, 1.0, 100.0),        # the token taken comes back
    (Bucket(0.0, 100.0), 100.5, 3.5, 100.5),        # with what came back meanwhile
    (Bucket(9.5, 100.0), 100.0, 10.0, 100.0),       # never above the burst
    (None, 100.0, 10.0, 100.0),                     # a new bucket is full
    (Bucket(3.0, 100.0), 99.0, 4.0, 100.0),         # a clock going back adds nothing more
])
def test_given_back(bucket: Bucket | None, now: float, tokens: float, at: float) -> None:
    assert given_back(bucket, FIVE, now) == Bucket(tokens, at)


def test_given_back_without_a_limit() -> None:
    off = Limit(rate=0.0, burst=1.0)
    assert given_back(Bucket(0.0, 0.0), off, 5.0) == refilled(Bucket(0.0, 0.0), off, 5.0)
