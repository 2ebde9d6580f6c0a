"""A memory erased by id leaves the held state of its cube, which stays held; a read
begun before the erasure never brings it back into a held state; the scope's last
memory erased lets the state go."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from streams.memory.model import HeldScopes
from streams.memory.providers.builtin.scope_cache import ScopeCache
from streams.memory.providers.builtin.scope_state import ScopeState

KEY = ("t1", "user_profile", "u1")


def row(i: int, text: str) -> Any:
    return SimpleNamespace(id=i, session_key=None, seq=i, content=text, type="fact",
                           kind="fact", doc_len=2, role="user", event_time=None,
                           source_event_ids="[]")


def stats(version: int, docs: int) -> Any:
    return SimpleNamespace(id=7, version=version, doc_count=docs, total_len=2 * docs,
                           tenant_id=KEY[0], cube=KEY[1], owner_id=KEY[2])


def state(version: int, rows: list[Any]) -> ScopeState:
    st = ScopeState(7, version, len(rows), 2 * len(rows), 0)
    st.add_rows(rows)
    return st


def holding(*texts: str) -> ScopeCache:
    cache = ScopeCache(SimpleNamespace(dialect=SimpleNamespace(name="mysql")),  # type: ignore[arg-type]
                       None)
    cache._install(state(1, [row(i + 1, t) for i, t in enumerate(texts)]), KEY)
    return cache


def erase(cache: ScopeCache, *ids: str, tenant: str = "t1") -> None:
    cache.drop(HeldScopes(tenant, memory_ids=frozenset(ids)))


def test_an_erased_memory_leaves_the_state_which_stays_held() -> None:
    cache = holding("a dog", "a secret", "a cat")
    erase(cache, "2")
    st = cache._states[7]
    assert sorted(st.positions) == ["1", "3"] and st.doc_count == 2
    assert cache.held_memories == 2
    erase(cache, "1", tenant="t2")  # another tenant's erasure names no memory of this one
    assert sorted(st.positions) == ["1", "3"]


def test_the_last_memory_erased_lets_the_state_go() -> None:
    cache = holding("a secret")
    erase(cache, "1")
    assert not cache.holds(7) and cache.held_memories == 0


async def test_a_read_begun_before_the_erasure_does_not_hold_what_it_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = holding("a dog", "a secret")
    read_at = cache.generation  # a search's reads begin, at a snapshot with both memories
    before = stats(2, 3)  # ... and a third, written since the state was held
    loads: list[int] = []

    async def snapshot_reads(conn: Any) -> bool:
        return True

    async def delta(conn: Any, st: ScopeState, s: Any) -> None:
        return None  # the counts disagree: a whole load

    async def load(conn: Any, s: Any) -> tuple[ScopeState, Any]:
        loads.append(int(s.version))  # what the old snapshot reads: the erased one too
        return state(int(s.version), [row(1, "a dog"), row(2, "a secret"), row(3, "new")]), (
            lambda: None)

    monkeypatch.setattr(cache, "snapshot_reads", snapshot_reads)
    monkeypatch.setattr(cache, "_delta", delta)
    monkeypatch.setattr(cache, "_load", load)
    erase(cache, "2")  # the erasure finishes before the search refreshes the scope
    assert await cache.fresh_on(SimpleNamespace(), before, read_at) is None  # type: ignore[arg-type]
    assert loads == [] and sorted(cache._states[7].positions) == ["1"]
