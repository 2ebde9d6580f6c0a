"""Held ids no longer valid, found by counting ranges: exactly those gone, at a cost of
the number gone rather than the number held; a range holding ids not held refuses."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memory.providers.builtin.gone_ids import (
    FANOUT,
    NARROW_AT_MOST,
    READ_AT_MOST,
    Bounds,
    gone_ids,
)


@dataclass
class Store:
    """The valid ids of one scope, and what was asked of it."""

    valid: set[int]
    counts: int = 0  # count queries
    reads: int = 0  # id queries
    ids_read: int = 0
    asked: list[Sequence[Bounds]] = field(default_factory=list)

    async def count_in(self, bounds: Sequence[Bounds]) -> list[tuple[int, int]]:
        self.counts += 1
        self.asked.append(bounds)
        return [(sum(1 for i in self.valid if a <= i <= b),
                 sum(i for i in self.valid if a <= i <= b)) for a, b in bounds]

    async def ids_in(self, bounds: Sequence[Bounds]) -> set[int]:
        self.reads += 1
        self.asked.append(bounds)
        found = {i for i in self.valid if any(a <= i <= b for a, b in bounds)}
        self.ids_read += len(found)
        return found


def find(held: Sequence[int], store: Store) -> set[int] | None:
    return asyncio.run(gone_ids(np.array(held, np.int64), store.count_in, store.ids_in))


def narrowings(n: int) -> int:
    """Levels of counting before ranges of ``n`` held ids are small enough to read."""
    return 0 if n <= READ_AT_MOST else math.ceil(math.log(n / READ_AT_MOST, FANOUT))


@pytest.mark.parametrize(("held", "valid", "gone", "reads"), [
    ([], set(), set(), 0),  # nothing held: nothing asked
    ([1, 2, 3], {1, 2, 3}, set(), 1),  # a small scope is read, not counted
    ([1, 2, 3], {1, 3}, {2}, 1),
    ([1, 2, 3], set(), {1, 2, 3}, 1),
    (list(range(1, 30_001)), set(range(1, 30_001)) - {17_000}, {17_000}, 1),
    (list(range(1, 30_001)), set(range(1, 30_001)) - {1, 30_000}, {1, 30_000}, 1),
    (list(range(2, 20_000, 2)), set(range(2, 20_000, 2)) - {2}, {2}, 1),
    (list(range(1, 30_001)), set(range(1, 30_001)), set(), 0),  # counted, nothing short
])
def test_finds_what_is_gone(held: list[int], valid: set[int], gone: set[int],
                            reads: int) -> None:
    store = Store(valid)
    assert find(held, store) == gone
    assert store.reads == reads
    most = 1 + max(len(gone), 1) * (narrowings(len(held)) - 1) if len(held) > READ_AT_MOST else 0
    assert narrowings(len(held)) <= store.counts + (not gone) * narrowings(len(held))
    assert store.counts <= most


def test_a_large_scope_with_one_gone_reads_a_few_ids() -> None:
    held = list(range(1, 100_001))
    store = Store(set(held) - {54_321})
    assert find(held, store) == {54_321}
    assert store.ids_read < READ_AT_MOST and store.counts <= narrowings(len(held))


def test_when_much_is_gone_the_short_ranges_are_read_whole() -> None:
    held = list(range(1, 10_001))
    gone = set(range(1, 10_001, 100))  # in every range of the first split
    store = Store(set(held) - gone)
    assert find(held, store) == gone
    assert store.counts <= 1 + NARROW_AT_MOST and store.reads == 1
    assert store.ids_read == len(held) - len(gone)


@pytest.mark.parametrize(("held", "valid"), [
    ([1, 3], {1, 2, 3}),  # a valid id between two held ones, in a range read
    # one gone and one valid not held in the same range: its count is whole, its sum not
    (list(range(0, 20_000, 2)), (set(range(0, 20_000, 2)) - {100, 15_000}) | {101}),
    (list(range(0, 20_000, 2)), set(range(0, 20_000, 2)) | {9_999}),  # ... in a range counted
    (list(range(0, 20_000, 2)), (set(range(0, 20_000, 2)) - {10_000}) | {9_999, 10_001}),
])
def test_a_range_holding_what_is_not_held_refuses(held: list[int], valid: set[int]) -> None:
    assert find(held, Store(valid)) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5_000), unique=True, max_size=3_000), st.data())
def test_exactly_the_gone_ones_at_a_cost_of_what_is_gone(held: list[int],
                                                         data: st.DataObject) -> None:
    held.sort()
    gone = set(data.draw(st.lists(st.sampled_from(held), unique=True)) if held else [])
    store = Store(set(held) - gone)
    assert find(held, store) == gone
    for bounds in store.asked:  # ranges disjoint and ascending, as the queries assume
        flat = [x for b in bounds for x in b]
        assert flat == sorted(flat) and all(a <= b for a, b in bounds)
    if len(gone) <= NARROW_AT_MOST:
        assert store.ids_read <= max(len(gone), 1) * READ_AT_MOST
        assert store.counts <= max(len(gone), 1) * max(narrowings(len(held)), 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5_000), unique=True, min_size=1, max_size=3_000), st.data())
def test_valid_ids_not_held_never_make_a_valid_one_gone(held: list[int],
                                                        data: st.DataObject) -> None:
    """Ids valid but not held (a state that missed some) are refused when a range
    shows them, and never make a valid memory look gone."""
    held.sort()
    gone = set(data.draw(st.lists(st.sampled_from(held), unique=True)))
    extra = set(data.draw(st.lists(st.integers(held[0], held[-1]), max_size=5))) - set(held)
    found = find(held, Store((set(held) - gone) | extra))
    assert found is None or found <= gone
    if extra and len(gone) <= len(extra) - 1:  # more shown than gone: some range shows it
        assert found is None
    if found is not None and len(found) == len(gone) - len(extra):
        # what the caller accepts (its count of the gone is gone − extra): only when
        # the extras' ids make up exactly the figures of gone ones in their ranges
        assert found == gone or len(extra) >= 2
