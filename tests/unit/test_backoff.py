"""The one backoff policy, by table: every site's numbers as the formula each
used before wrote them out, computed by hand."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from itertools import islice

import pytest

from streams.adapters.db.errors import is_transient
from streams.adapters.http.client import DEFAULT_RETRY, RetryPolicy
from streams.backoff import Backoff, forever
from streams.consolidation.failures import FailureRouter


def fixed(r: float) -> Callable[[], float]:
    return lambda: r


def never() -> float:
    raise AssertionError("a policy without jitter drew a random number")


@pytest.mark.parametrize(("policy", "rand", "expected"), [
    # retry_forever and the consolidation processor's in-place wait, ingest defaults
    # (0.2 s doubling to 10 s, delay * (0.5 + r / 2)): r = 0.5 is 3/4 of the base
    (forever(0.2, 10.0), 0.5, [0.15, 0.3, 0.6, 1.2, 2.4, 4.8, 7.5, 7.5]),
    (forever(0.2, 10.0), 0.0, [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]),
    # the processor's own defaults (0.5 s to 10 s)
    (forever(0.5, 10.0), 0.5, [0.375, 0.75, 1.5, 3.0, 6.0, 7.5, 7.5]),
    # the retry topic, consolidation defaults (30 s doubling to 1800 s, upper half)
    (Backoff(30.0, 1800.0, jitter="half"), 0.0,
     [15.0, 30.0, 60.0, 120.0, 240.0, 480.0, 900.0, 900.0]),
    (Backoff(30.0, 1800.0, jitter="half"), 0.5,
     [22.5, 45.0, 90.0, 180.0, 360.0, 720.0, 1350.0, 1350.0]),
    # expiry sweeps, default interval (60 s doubling to 3600 s, no jitter)
    (Backoff(60.0, 3600.0), 0.0, [60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0]),
    # a row failing with an unknown error (0.2 s doubling, no cap)
    (Backoff(0.2), 0.0, [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8]),
    # another factor
    (Backoff(1.0, 100.0, factor=3.0), 0.0, [1.0, 3.0, 9.0, 27.0, 81.0, 100.0, 100.0]),
])
def test_the_delays_after_attempts_1_2_3(policy: Backoff, rand: float,
                                          expected: list[float]) -> None:
    got = [policy.delay(n, fixed(rand)) for n in range(1, len(expected) + 1)]
    assert got == pytest.approx(expected, rel=1e-12)
    assert list(islice(policy.delays(fixed(rand)), len(expected))) == got


@pytest.mark.parametrize(("policy", "attempt", "base"), [
    (Backoff(0.2, 10.0), 1, 0.2),
    (Backoff(0.2, 10.0), 0, 0.2),  # below 1 counts as 1
    (Backoff(0.2, 10.0), -3, 0.2),
    (Backoff(0.25, 10.0), 6, 8.0),
    (Backoff(0.25, 10.0), 7, 10.0),
    # the first wait above the cap: capped, or as given (retry_forever's loop began
    # with initial_s and capped only the doubled delay)
    (Backoff(20.0, 10.0), 1, 10.0),
    (Backoff(20.0, 10.0), 2, 10.0),
    (forever(20.0, 10.0), 1, 20.0),
    (forever(20.0, 10.0), 2, 10.0),
    (forever(20.0, 10.0), 3, 10.0),
    # far beyond the float range of the growth: the cap (no OverflowError)
    (forever(0.2, 10.0), 5000, 10.0),
    (Backoff(30.0, 1800.0), 10**6, 1800.0),
    (Backoff(0.2), 5000, math.inf),
])
def test_the_base_delay(policy: Backoff, attempt: int, base: float) -> None:
    assert policy.base(attempt) == base


@pytest.mark.parametrize("policy", [Backoff(0.2, 10.0), Backoff(60.0, 3600.0), Backoff(0.2)])
def test_no_jitter_is_the_base_and_draws_nothing(policy: Backoff) -> None:
    assert [policy.delay(n, never) for n in range(1, 9)] == [policy.base(n) for n in range(1, 9)]


@pytest.mark.parametrize("r", [0.0, 0.1, 0.5, 0.9, 0.999999])
def test_half_jitter_is_the_upper_half_of_the_base(r: float) -> None:
    policy = forever(0.2, 10.0)
    for n in range(1, 10):
        base = policy.base(n)
        assert base / 2 <= policy.delay(n, fixed(r)) < base
        assert policy.delay(n, fixed(r)) == base * (0.5 + r / 2)


def test_the_policy_is_a_value() -> None:
    assert forever(0.2, 10.0) == Backoff(0.2, 10.0, 2.0, "half", cap_first=False)
    with pytest.raises(FrozenInstanceError):
        Backoff(0.2).initial_s = 1.0  # type: ignore[misc]


# ------------------------------------------------------------- the sites' own APIs
@pytest.mark.parametrize(("policy", "rng", "expected"), [
    # provider calls, consolidation defaults: retry n (0-based) waits 0.2 * 2**n up to 5 s
    (DEFAULT_RETRY, 0.0, [0.1, 0.2, 0.4, 0.8, 1.6, 2.5, 2.5]),
    (DEFAULT_RETRY, 0.5, [0.15, 0.3, 0.6, 1.2, 2.4, 3.75, 3.75]),
    # the model client (0.5 s to 5 s)
    (RetryPolicy(attempts=3, initial_s=0.5, max_s=5.0), 0.5, [0.375, 0.75, 1.5, 3.0, 3.75]),
    (RetryPolicy(initial_s=0.1, max_s=1.0, multiplier=3.0, jitter=False), 0.0,
     [0.1, 0.3, 0.9, 1.0, 1.0]),
])
def test_provider_retry_waits(policy: RetryPolicy, rng: float, expected: list[float]) -> None:
    got = [policy.delay(i, rng=fixed(rng)) for i in range(len(expected))]
    assert got == pytest.approx(expected, rel=1e-12)
    assert policy.delay(-1, rng=fixed(rng)) == got[0]


def _router(initial_s: float, max_s: float, rng: float) -> FailureRouter:
    return FailureRouter(source_topic="closed", retry_topic="retry", dlq_topic="dlq",
                         max_attempts=5, initial_s=initial_s, max_s=max_s,
                         is_transient=is_transient, rng=fixed(rng))


@pytest.mark.parametrize(("initial_s", "max_s", "rng", "expected"), [
    (30.0, 1800.0, 0.0, [15.0, 15.0, 30.0, 60.0, 120.0, 240.0, 480.0, 900.0, 900.0]),
    (30.0, 1800.0, 0.5, [22.5, 22.5, 45.0, 90.0, 180.0, 360.0, 720.0, 1350.0, 1350.0]),
    (10.0, 30.0, 0.5, [7.5, 7.5, 15.0, 22.5, 22.5]),
])
def test_retry_topic_waits_from_attempt_0(initial_s: float, max_s: float, rng: float,
                                          expected: list[float]) -> None:
    router = _router(initial_s, max_s, rng)
    assert [router.delay(a) for a in range(len(expected))] == expected
    assert router.backoff.max_s == max_s  # the scheduler's longest wait
