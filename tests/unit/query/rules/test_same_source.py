"""A fact and the episode it was judged from never both take a place in a reply."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.memory.model import StoredMemory
from streams.query.rules.same_source import fold_same_source


def mem(mid: str, score: float, kind: str, *sources: str, cube: str = "user_profile",
        span: tuple[int, int] | None = None) -> StoredMemory:
    return StoredMemory(id=mid, content=mid, cube=cube, score=score, kind=kind,  # type: ignore[arg-type]
                        source_event_ids=sources, metadata={"span": span} if span else {})


@pytest.mark.parametrize(
    ("memories", "kept"),
    [
        pytest.param([mem("f", 0.9, "fact", "e1"), mem("ep", 0.8, "episode", "e1")],
                     [("f", ["ep"])], id="fact-scored-higher"),
        pytest.param([mem("f", 0.5, "fact", "e1"), mem("ep", 0.8, "episode", "e1")],
                     [("ep", ["f"])], id="episode-scored-higher"),
        pytest.param([mem("ep", 0.7, "episode", "e1"), mem("f", 0.7, "fact", "e1")],
                     [("f", ["ep"])], id="a-tie-keeps-the-fact"),
        pytest.param([mem("ep", 0.9, "episode", "e1"), mem("f1", 0.8, "fact", "e1"),
                      mem("f2", 0.7, "fact", "e1")],
                     [("ep", ["f1", "f2"])], id="an-episode-covers-its-facts"),
        pytest.param([mem("f1", 0.9, "fact", "e1"), mem("ep", 0.8, "episode", "e1"),
                      mem("f2", 0.7, "fact", "e1")],
                     [("f1", ["ep"]), ("f2", [])], id="two-facts-both-stay"),
        pytest.param([mem("f", 0.9, "fact", "e1", "e2"), mem("ep1", 0.8, "episode", "e1"),
                      mem("ep2", 0.7, "episode", "e2")],
                     [("f", ["ep1", "ep2"])], id="a-fact-of-two-turns"),
        pytest.param([mem("ep1", 0.9, "episode", "e1"), mem("ep2", 0.8, "episode", "e2"),
                      mem("f", 0.7, "fact", "e3")],
                     [("ep1", []), ("ep2", []), ("f", [])], id="nothing-shared"),
        pytest.param([mem("lesson", 1.0, "fact", "e3", cube="agent_a"),
                      mem("ep", 0.7, "episode", "e3")],
                     [("lesson", ["ep"])], id="across-cubes"),
        pytest.param([mem("lesson", 1.0, "fact", "e3", cube="agent_a"),
                      mem("p1", 0.7, "episode", "e3", span=(0, 600)),
                      mem("p2", 0.6, "episode", "e3", span=(600, 1100))],
                     [("lesson", []), ("p1", []), ("p2", [])], id="passages-are-not-folded"),
    ],
)
def test_fold_same_source(memories: list[StoredMemory], kept: list[tuple[str, list[str]]]
                          ) -> None:
    folded = fold_same_source(memories)
    assert [(m.id, m.metadata.get("covers", [])) for m in folded] == kept


def folded_by_definition(memories: list[StoredMemory]) -> list[tuple[str, list[str]]]:
    """The rule as stated: best first (a fact before an episode on a tie), a memory is
    folded into the first kept one of the other kind sharing a source event with it
    (the kept one that first claimed that event, events in the memory's order)."""
    ranked = sorted(memories, key=lambda m: (m.score, m.kind != "episode"), reverse=True)
    kept: list[tuple[StoredMemory, list[str]]] = []
    for m in ranked:
        owners = [next(i for i, (k, _) in enumerate(kept)
                       if k.kind != m.kind and e in k.source_event_ids)
                  for e in m.source_event_ids
                  if any(k.kind != m.kind and e in k.source_event_ids for k, _ in kept)]
        if owners:
            kept[owners[0]][1].append(m.id)
        else:
            kept.append((m, []))
    return [(m.id, covered) for m, covered in kept]


@given(st.lists(st.tuples(st.sampled_from([0.2, 0.5, 0.7, 0.9]),
                          st.sampled_from(["fact", "episode"]),
                          st.lists(st.sampled_from(["e1", "e2", "e3", "e4"]), max_size=3,
                                   unique=True)), max_size=12))
def test_folding_is_the_rule_as_stated(drawn: list[tuple[float, str, list[str]]]) -> None:
    memories = [mem(f"m{i}", score, kind, *sources)
                for i, (score, kind, sources) in enumerate(drawn)]
    got = [(m.id, list(m.metadata.get("covers", []))) for m in fold_same_source(memories)]
    assert got == folded_by_definition(memories)
