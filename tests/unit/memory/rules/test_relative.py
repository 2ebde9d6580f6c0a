"""Ranking what an external provider returns: table-driven."""

from __future__ import annotations

import pytest

from streams.memory.model import StoredMemory
from streams.memory.rules.relative import (
    lexical_signal,
    provider_signal,
    reranked,
    reranked_per_cube,
)


def found(*hits: tuple[str, float]) -> list[StoredMemory]:
    return [StoredMemory(str(i), text, "user_profile", score=s)
            for i, (text, s) in enumerate(hits)]


@pytest.mark.parametrize(("scores", "expected"), [
    ((0.4, 0.224, 0.1), [1.0, 0.56, 0.25]),  # Mem0's hybrid scale, relative to its best
    ((0.5, 0.5, 0.5, 0.5), [1.0, 0.75, 0.5, 0.25]),  # MemOS' constant score: its order
    ((0.9,), [1.0]),
    ((), []),
    ((0.0, 0.0), [1.0, 0.5]),  # no score at all: the order
])
def test_the_provider_signal_is_its_scores_or_its_order(scores: tuple[float, ...],
                                                         expected: list[float]) -> None:
    got = provider_signal(found(*((f"m{i}", s) for i, s in enumerate(scores))))
    assert got == pytest.approx(expected)


@pytest.mark.parametrize(("query", "texts", "expected"), [
    ("where does Alice live", ("Alice lives in Oslo.", "Alice plays cello."), [1.0, None]),
    ("zebra quantum", ("Alice lives in Oslo.", "Alice plays cello."), [0.0, 0.0]),
    ("dogs", ("My dog is Rex.", "I like tea."), [1.0, 0.0]),  # stemmed, as built-in search
    ("我喜欢绿茶", ("我喜欢绿茶。", "I like tea."), [1.0, 0.0]),
])
def test_the_lexical_signal_is_bm25_over_the_returned_memories(
        query: str, texts: tuple[str, ...], expected: list[float | None]) -> None:
    got = lexical_signal(query, found(*((t, 0.5) for t in texts)))
    for value, want in zip(got, expected, strict=True):
        if want is None:
            assert 0 < value < 1
        else:
            assert value == pytest.approx(want)


@pytest.mark.parametrize(("hits", "query", "weight", "relativity", "expected"), [
    # constant scores: the word match goes first, the provider's order breaks ties
    ((("I like tea.", 0.5), ("My dog is Rex.", 0.5), ("I live in Oslo.", 0.5)),
     "what is my dog called", 0.5, 0.0, ["1", "0", "2"]),
    # the provider's order alone
    ((("I like tea.", 0.5), ("My dog is Rex.", 0.5)), "dog", 0.0, 0.0, ["0", "1"]),
    # the floor is relative to the best of the mix
    ((("I like tea.", 0.5), ("My dog is Rex.", 0.5), ("I live in Oslo.", 0.5)),
     "dog", 0.5, 0.7, ["1"]),
    # Mem0's hybrid: a keyword hit at 0.22 keeps its place when its words match
    ((("Alice likes flat white coffee.", 0.22), ("Alice plays the cello.", 0.4)),
     "what coffee does Alice like", 0.5, 0.45, ["0", "1"]),
    ((), "anything", 0.5, 0.45, []),
])
def test_reranked(hits: tuple[tuple[str, float], ...], query: str, weight: float,
                  relativity: float, expected: list[str]) -> None:
    out = reranked(query, found(*hits), relativity, lexical_weight=weight)
    assert [m.id for m in out] == expected
    if out:
        assert out[0].score == 1.0
        assert [m.score for m in out] == sorted((m.score for m in out), reverse=True)


def test_each_cube_is_reranked_on_its_own() -> None:
    user = [StoredMemory(id=f"u{i}", content=f"Alice flew to Lisbon {i}", cube="user_profile",
                         score=0.9) for i in range(3)]
    agent = [StoredMemory(id="a", content="use ISO dates for bookings", cube="agent_x", score=0.2)]
    together = reranked("Lisbon flights", user + agent, 0.45, lexical_weight=0.75)
    assert "a" not in [m.id for m in together]  # under the user's best hit
    apart = reranked_per_cube("Lisbon flights", user + agent, 0.45, lexical_weight=0.75)
    assert [(m.id, m.score) for m in apart if m.cube == "agent_x"] == [("a", 1.0)]
    assert max(m.score for m in apart if m.cube == "user_profile") == 1.0
