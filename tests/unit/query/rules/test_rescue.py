"""When a request its owner has not begun is taken over, and the wait it asks for."""

from __future__ import annotations

import pytest

from streams.query.rules.rescue import caller_wait_ms, take_over_at


@pytest.mark.parametrize(("value", "wait_ms"), [
    (b'{"options": {"timeout_ms": 300}}', 300),
    (b'{"options": {"timeout_ms": 1000}, "message": "hi"}', 1000),
    (b'{"message": "hi"}', 1000),  # the default
    (b'{"options": {}}', 1000),
    (b'{"options": {"timeout_ms": "300"}}', 1000),  # not a number
    (b'{"options": {"timeout_ms": true}}', 1000),
    (b'{"options": {"timeout_ms": 1.5}}', 1000),
    (b'{"options": {"timeout_ms": 1}}', 10),  # held to what a request may ask
    (b'{"options": {"timeout_ms": 999999999}}', 60_000),
    (b'{"options": 3}', 1000),
    (b'[1, 2]', 1000),  # not an object
    (b'\xff\xfe', 1000),  # not UTF-8
    (None, 1000),
])
def test_the_wait_a_request_asks_for(value: bytes | None, wait_ms: int) -> None:
    assert caller_wait_ms(value) == wait_ms


@pytest.mark.parametrize(("produced", "wait_ms", "after_s", "share", "due"), [
    (100.0, 1000, 0.4, 0.5, 100.4),  # after_s is sooner than half the wait
    (100.0, 300, 0.4, 0.5, 100.15),  # half of a short wait is sooner
    (100.0, 60_000, 0.4, 0.5, 100.4),
    (100.0, 1000, 0.4, 0.25, 100.25),
    (100.0, 10, 0.4, 0.5, 100.005),
    (None, 1000, 0.4, 0.5, None),  # no timestamp: never
    (0.0, 1000, 0.4, 0.5, None),
    (-1.0, 1000, 0.4, 0.5, None),
])
def test_when_a_request_is_taken_over(produced: float | None, wait_ms: int, after_s: float,
                                      share: float, due: float | None) -> None:
    got = take_over_at(produced, wait_ms, after_s=after_s, share=share)
    assert got == (None if due is None else pytest.approx(due))


@pytest.mark.parametrize(("produced", "received", "wait_ms", "due"), [
    (100.0, 100.05, 1000, 100.4),  # clocks agree: the producer's time decides
    (100.0, 100.05, 300, 100.15),
    (95.0, 100.0, 1000, 100.3),  # a producer 5 s behind: the delay after it was read
    (105.0, 100.0, 1000, 100.4),  # 5 s ahead: looked at as if produced now
    (9e15, 100.0, 1000, 100.4),  # absurd: the same
    (95.0, 100.0, 300, 100.05),  # behind, a short wait: its half, less the reader's lag
    (None, 100.0, 1000, None),  # no timestamp: never
])
def test_when_a_request_read_now_is_taken_over(produced: float | None, received: float,
                                               wait_ms: int, due: float | None) -> None:
    from streams.query.rules.rescue import due_at

    got = due_at(produced, received, wait_ms, after_s=0.4, share=0.5)
    assert got == (None if due is None else pytest.approx(due))


@pytest.mark.parametrize(("produced", "received", "wait_ms", "gone"), [
    (100.0, 100.05, 1000, 101.0),
    (95.0, 100.0, 1000, 100.9),  # a producer's clock behind: from when it was read
    (105.0, 100.0, 1000, 106.0),
])
def test_until_when_a_caller_may_still_wait(produced: float, received: float, wait_ms: int,
                                            gone: float) -> None:
    from streams.query.rules.rescue import caller_gone_at

    assert caller_gone_at(produced, received, wait_ms) == pytest.approx(gone)
