"""A session in bounded parts: how much a part takes, how parts are named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.consolidation.rules.parts import (
    PartBound,
    first_id,
    next_id,
    part_id,
    previous_id,
    take,
)


@pytest.mark.parametrize(("sizes", "max_messages", "max_bytes", "at_least_one", "expected"), [
    ([], 3, 100, True, 0),
    ([10, 10], 3, 100, True, 2),  # everything fits
    ([10] * 5, 3, 100, True, 3),  # the message bound
    ([40, 40, 40], 5, 100, True, 2),  # the byte bound
    ([40, 60, 1], 5, 100, True, 2),  # exactly at the byte bound
    ([500, 1], 5, 100, True, 1),  # one message over the bytes goes alone
    ([500, 1], 5, 100, False, 0),  # ... unless the part has others already
    ([0, 0, 0], 2, 1, True, 2),  # empty texts count as messages
    ([10, 10], 0, 100, True, 0),  # nothing left of the part
    ([10, 10], 2, 0, False, 0),
])
def test_a_part_takes_the_longest_prefix_within_both_bounds(
        sizes: list[int], max_messages: int, max_bytes: int, at_least_one: bool,
        expected: int) -> None:
    assert take(sizes, max_messages, max_bytes, at_least_one=at_least_one) == expected


@given(st.lists(st.integers(0, 300), max_size=40), st.integers(1, 10), st.integers(1, 600))
def test_parts_cover_a_session_once_and_in_order(sizes: list[int], n: int, b: int) -> None:
    rest, parts = list(sizes), []
    while rest:
        k = take(rest, n, b)
        assert 1 <= k <= n
        assert k == 1 or sum(rest[:k]) <= b
        parts.append(rest[:k])
        rest = rest[k:]
    assert [s for p in parts for s in p] == sizes


@pytest.mark.parametrize(("bound"), [(0, 10), (10, 0)])
def test_a_bound_takes_something(bound: tuple[int, int]) -> None:
    with pytest.raises(ValueError):
        PartBound(*bound)


@pytest.mark.parametrize(("first", "part", "expected"), [
    ("t/c#3", 1, "t/c#3"),
    ("t/c#3", 2, "t/c#3+2"),
    ("t/c+x#3~ab12", 12, "t/c+x#3~ab12+12"),
])
def test_part_ids(first: str, part: int, expected: str) -> None:
    assert part_id(first, part) == expected
    assert first_id(expected, part) == first
    assert next_id(expected, part) == part_id(first, part + 1)
    assert previous_id(expected, part) == (None if part == 1 else part_id(first, part - 1))


def test_a_part_id_must_name_its_part() -> None:
    with pytest.raises(ValueError):
        first_id("t/c#3+2", 3)
    with pytest.raises(ValueError):
        part_id("t/c#3", 0)
