"""The waits each retrying loop sleeps, recorded: the sequences the loops'
former formulas gave, written out by hand."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.isolation import IsolatingWriter
from streams.adapters.http.client import RetryPolicy, with_retries
from streams.backoff import retry_forever
from streams.consolidation.expiry import ExpirySweeper
from streams.consolidation.model import PendingExpiry
from streams.consolidation.pipeline import Outcome
from streams.consolidation.processor import ConsolidationProcessor
from streams.memory.provider import RetryableProviderError
from streams.memory.provider import Scope as ProviderScope
from streams.memory.registry import ProviderRegistry
from streams.testing.consolidation import InMemoryExpiries
from streams.wire.records import SessionClosed
from tests.agents.consolidation_harness import Harness
from tests.agents.test_isolation import FakeTable, odd


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, s: float) -> None:
        self.waits.append(s)


def failing(times: int,
            error: type[Exception] = RuntimeError) -> Callable[[], Awaitable[str]]:
    left = times

    async def op() -> str:
        nonlocal left
        if left:
            left -= 1
            raise error("down")
        return "ok"

    return op


@pytest.mark.parametrize(("initial_s", "max_s", "rand", "expected"), [
    # delay * (0.5 + r / 2), then delay = min(max_s, delay * 2)
    (0.2, 1.0, 0.5, [0.15, 0.3, 0.6, 0.75, 0.75]),
    (0.25, 1.5, 0.5, [0.1875, 0.375, 0.75, 1.125, 1.125]),
    (0.5, 10.0, 0.0, [0.25, 0.5, 1.0, 2.0, 4.0, 5.0]),
    # the first delay is initial_s even above max_s; the doubled one is capped
    (4.0, 1.0, 0.0, [2.0, 0.5, 0.5]),
])
async def test_retry_forever_waits(initial_s: float, max_s: float, rand: float,
                                   expected: list[float]) -> None:
    sleep = Sleeps()
    op = failing(len(expected))
    assert await retry_forever(op, what="test", initial_s=initial_s, max_s=max_s,
                               sleep=sleep, rand=lambda: rand) == "ok"
    assert sleep.waits == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("rand", "expected"), [
    (0.0, [0.25, 0.5, 1.0, 1.0, 1.0]),
    (0.5, [0.375, 0.75, 1.5, 1.5, 1.5]),
])
async def test_a_database_outage_is_waited_out_like_retry_forever(
    engine: AsyncEngine, rand: float, expected: list[float], monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness(engine)
    sleep = Sleeps()
    processor = ConsolidationProcessor(h.pipeline, h.router, h.publisher, infra_initial_s=0.5,
                                       infra_max_s=2.0, sleep=sleep, rand=lambda: rand)
    await h.say("c1", [("user", "I live in Rome.")])
    real = h.pipeline.run
    failures = [OperationalError("SELECT 1", {}, Exception("gone away"))] * len(expected)

    async def flaky(closed: SessionClosed) -> Outcome:
        if failures:
            raise failures.pop()
        return await real(closed)

    monkeypatch.setattr(h.pipeline, "run", flaky)
    (res,) = await processor.process([h.record(h.closed("c1"))])
    assert res.outcome == "done"
    assert sleep.waits == expected


async def no_probe() -> None:
    return None


@pytest.mark.parametrize(("attempts", "backoff_s", "expected"), [
    (3, 0.2, [0.2, 0.4]),  # the defaults: delay, then delay *= 2
    (5, 0.5, [0.5, 1.0, 2.0, 4.0]),
    (1, 0.2, []),
])
async def test_a_row_failing_with_an_unknown_error_waits_doubling(
    attempts: int, backoff_s: float, expected: list[float],
) -> None:
    table = FakeTable({0}, error=odd)
    sleep = Sleeps()
    out = await IsolatingWriter(table.write, [0], probe=no_probe, attempts=attempts,
                                backoff_s=backoff_s, sleep=sleep).run()
    assert [r.index for r in out.rejected] == [0]
    assert sleep.waits == pytest.approx(expected, rel=1e-12)


def failing_expiries(attempts: Sequence[int], now: datetime) -> InMemoryExpiries:
    """Due expiries whose provider is not configured: each sweep fails them all."""
    store = InMemoryExpiries()
    scope = ProviderScope("t", "u", "a")
    for i, a in enumerate(attempts):
        store.add(PendingExpiry("c", i, scope, "gone", "fact", ["m"], "", a), now)
    return store


@pytest.mark.parametrize(("initial_s", "max_s", "expected"), [
    # min(max_s, initial_s * 2 ** (attempts - 1)) after attempt attempts + 1 failed
    (60.0, 3600.0, [120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0]),
    (1.0, 4.0, [2.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]),
])
async def test_failed_expiries_are_tried_again_doubling(
    initial_s: float, max_s: float, expected: list[float],
) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    store = failing_expiries(range(1, 8), now)
    sweeper = ExpirySweeper(store, ProviderRegistry({}),
                            initial_s=initial_s, max_s=max_s, clock=now.timestamp)
    assert await sweeper.sweep() == (0, 7)
    assert [a.next_at for a in store.attempts] == [now + timedelta(seconds=s) for s in expected]


@pytest.mark.parametrize(("policy", "bases"), [
    # retry n (0-based) waits min(max_s, initial_s * multiplier ** n), upper half
    (RetryPolicy(attempts=6, initial_s=0.2, max_s=5.0), [0.2, 0.4, 0.8, 1.6, 3.2]),
    (RetryPolicy(attempts=5, initial_s=0.5, max_s=2.0), [0.5, 1.0, 2.0, 2.0]),
    (RetryPolicy(attempts=4, initial_s=0.1, max_s=0.3, jitter=False), [0.1, 0.2, 0.3]),
])
async def test_provider_calls_wait_between_attempts(policy: RetryPolicy,
                                                    bases: list[float]) -> None:
    sleep = Sleeps()
    with pytest.raises(RetryableProviderError):
        await with_retries(failing(100, RetryableProviderError), policy, sleep=sleep)
    assert len(sleep.waits) == len(bases)
    if policy.jitter:
        assert all(b / 2 <= w <= b for w, b in zip(sleep.waits, bases, strict=True))
    else:
        assert sleep.waits == pytest.approx(bases, rel=1e-12)
