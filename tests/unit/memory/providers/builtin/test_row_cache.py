"""The row cache of the built-in provider: the rows it holds are served, the others
loaded, the least recently used dropped, and the collector does not walk what it holds."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from streams.memory.model import HeldScopes
from streams.memory.providers.builtin.row_cache import Cached, MemoryCache, memory_of


def row(i: int) -> Cached:
    return Cached(i, f"memory {i}", "user_profile", "fact", "user", 0.5,
                  datetime(2024, 5, 1, tzinfo=UTC), (f"e{i}",), "fact", "s1", i, "u1",
                  "a1", "2024-05-01", "2024-05-01")


class Loader:
    """Reads rows by id (rows of :func:`row`, as ``Cached.of`` is made to read them)."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    async def __call__(self, ids: list[int]) -> Sequence[Any]:
        self.asked.append(list(ids))
        return [SimpleNamespace(id=i) for i in ids]


def collect() -> None:
    """Full collections until the new tuples are untracked: one may meet a row before
    the tuple inside it, and untracks only the inner one."""
    for _ in range(3):
        gc.collect()


@pytest.fixture(autouse=True)
def rows_by_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Cached, "of", classmethod(lambda cls, r: row(int(r.id))))


def test_rows_become_plain_tuples_the_collector_lets_go_of() -> None:
    cache = MemoryCache(max_rows=1000)
    cache.keep([row(i) for i in range(600)])
    collect()
    cache._settle()
    assert not cache._fresh and len(cache._items) == 600
    collect()
    assert not gc.is_tracked(cache._items)  # an OrderedDict would be walked every time


async def test_held_rows_are_served_and_the_others_loaded_once() -> None:
    cache = MemoryCache(max_rows=10)
    cache.keep([row(i) for i in (1, 2, 3)])
    load = Loader()
    found = await cache.get([3, 4, 1, 5], load)
    assert load.asked == [[4, 5]]
    assert sorted(found) == [1, 3, 4, 5]
    assert memory_of(found[4], "4", 0.9).content == "memory 4"
    assert await cache.get([4, 5, 2], load) and load.asked == [[4, 5]]
    collect()
    assert await cache.get([1, 2, 3, 4, 5], load) and load.asked == [[4, 5]]
    collect()
    assert not gc.is_tracked(cache._items)  # serving moves rows, never re-tracks the dict


async def test_the_least_recently_used_rows_go_first() -> None:
    cache = MemoryCache(max_rows=4)
    cache.keep([row(i) for i in (1, 2, 3, 4)])
    collect()
    load = Loader()
    await cache.get([1], load)  # 1 used: 2 is the oldest now
    cache.keep([row(5), row(6)])
    assert len(cache) == 4
    await cache.get([1, 4, 5, 6], load)
    assert load.asked == []
    await cache.get([2, 3], load)
    assert load.asked == [[2, 3]]


def test_a_cache_of_no_rows_holds_nothing() -> None:
    cache = MemoryCache(max_rows=0)
    cache.keep([row(1)])
    assert len(cache) == 0


def test_clear_forgets_every_row() -> None:
    cache = MemoryCache(max_rows=10)
    cache.keep([row(i) for i in range(5)])
    collect()
    cache.keep([row(9)])
    cache.clear()
    assert len(cache) == 0


def tenant_row(i: int, tenant: str, user: str = "u1") -> Cached:
    return row(i)._replace(tenant_id=tenant, user_id=user)


async def test_a_drop_takes_only_the_rows_it_names() -> None:
    cache = MemoryCache(max_rows=100)
    cache.keep([tenant_row(1, "t1"), tenant_row(2, "t1", "u2"), tenant_row(3, "t2"),
                tenant_row(4, "t1")])
    assert cache.drop(HeldScopes("t1", user_id="u1")) == 2
    assert sorted(await cache.get([2, 3], Loader())) == [2, 3] and len(cache) == 2
    assert cache.drop(HeldScopes("t2", memory_ids=frozenset({"3", "9"}))) == 1
    assert len(cache) == 1


async def test_rows_read_before_a_drop_are_held_unless_it_names_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = MemoryCache(max_rows=100)
    monkeypatch.setattr(Cached, "of", classmethod(
        lambda cls, r: tenant_row(int(r.id), "t1" if int(r.id) < 10 else "t2")))
    since = cache.generation

    async def dropped_meanwhile(ids: list[int]) -> Sequence[Any]:
        cache.drop(HeldScopes("t1"))
        return [SimpleNamespace(id=i) for i in ids]

    found = await cache.get([1, 11], dropped_meanwhile, since)
    assert sorted(found) == [1, 11]  # the caller is answered
    assert sorted(cache._items) + sorted(cache._fresh) == [11]  # t1's row is not held
