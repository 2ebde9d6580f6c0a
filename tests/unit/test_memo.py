"""The bounded memo: the values of the function it memoises, the least recently used
dropped first, and nothing for the garbage collector to walk."""

from __future__ import annotations

import gc
from collections import OrderedDict
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memo import Memo, drop_oldest
from streams.memory.rules.lexical import stem
from streams.tokens import TokenCounter


class Calls:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def __call__(self, key: int) -> str:
        self.seen.append(key)
        return f"v{key}"


class ReferenceLRU:
    """The policy as its docstring states it: a hit is the most recent; a miss on a
    full memo first drops the older half (by recency)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.order: OrderedDict[int, str] = OrderedDict()

    def __call__(self, key: int) -> tuple[str, bool]:
        if key in self.order:
            self.order.move_to_end(key)
            return self.order[key], False
        if len(self.order) >= self.maxsize:
            for _ in range(max(1, self.maxsize // 2)):
                self.order.popitem(last=False)
        self.order[key] = f"v{key}"
        return self.order[key], True

    def remember(self, keys: list[int]) -> None:
        for k in keys[-self.maxsize:]:
            self.order.pop(k, None)
            self.order[k] = f"v{k}"
        while len(self.order) > self.maxsize:
            self.order.popitem(last=False)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.lists(st.integers(0, 15), max_size=120))
def test_a_memo_gives_the_functions_values_and_computes_what_it_does_not_hold(
        maxsize: int, keys: list[int]) -> None:
    calls = Calls()
    memo: Memo[int, str] = Memo(calls, maxsize)
    ref = ReferenceLRU(maxsize)
    computed = []
    for k in keys:
        want, miss = ref(k)
        assert memo(k) == want
        if miss:
            computed.append(k)
        assert len(memo) <= maxsize
        assert list(memo._items) == list(ref.order)
    assert calls.seen == computed


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.lists(st.one_of(st.integers(0, 15),
                                             st.lists(st.integers(0, 15), max_size=12)),
                                   max_size=60))
def test_values_computed_elsewhere_are_held_as_the_most_recent(
        maxsize: int, steps: list[int | list[int]]) -> None:
    calls = Calls()
    memo: Memo[int, str] = Memo(calls, maxsize)
    ref = ReferenceLRU(maxsize)
    computed = []
    for step in steps:
        if isinstance(step, list):
            memo.remember([(k, f"v{k}") for k in step])
            ref.remember(step)
        else:
            want, miss = ref(step)
            assert memo(step) == want
            computed += [step] if miss else []
        assert len(memo) <= maxsize
        assert list(memo._items) == list(ref.order)
    assert calls.seen == computed


def test_a_hit_keeps_a_key_and_the_least_recently_used_go_first() -> None:
    calls = Calls()
    memo: Memo[int, str] = Memo(calls, 4)
    for k in (1, 2, 3, 4, 1):  # 1 used again: 2 and 3 are now the oldest
        memo(k)
    memo(5)
    assert sorted(memo._items) == [1, 4, 5]
    memo(1)
    assert calls.seen == [1, 2, 3, 4, 5]


def test_a_memo_holds_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Memo(str, 0)


def test_drop_oldest_deletes_the_first_entries() -> None:
    d = {k: k for k in "abcde"}
    drop_oldest(d, 2)
    assert list(d) == ["c", "d", "e"]
    drop_oldest(d, 0)
    assert list(d) == ["c", "d", "e"]


def test_a_memo_of_strings_and_numbers_is_not_walked_by_the_collector() -> None:
    memo: Memo[str, int] = Memo(len, 1000)
    cached = lru_cache(maxsize=1000)(len)
    for i in range(500):
        memo(f"text {i}")
        cached(f"text {i}")
    gc.collect()
    assert not gc.is_tracked(memo._items)
    assert gc.is_tracked(cached)  # what the memo replaces: walked at every collection
    assert len(gc.get_referents(cached)) > 500


def test_the_stemmer_and_the_token_counter_keep_their_memos_untracked() -> None:
    counter = TokenCounter()
    for i in range(200):
        counter(f"[2024-05-0{i % 9 + 1}] The user likes line {i}.\n")
        stem(f"paintings{i}")
    gc.collect()
    assert not gc.is_tracked(counter._count._items)
    assert not gc.is_tracked(stem._items)
    assert counter("hello world") == len(counter.encode("hello world"))
    assert stem("paintings") == "paint"
