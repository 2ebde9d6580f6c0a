"""A fact and the episode it was judged from never both take a place in a reply."""

from __future__ import annotations

import pytest

from streams.memory.model import StoredMemory
from streams.query.rules.same_source import fold_same_source


def mem(mid: str, score: float, kind: str, *sources: str, cube: str = "user_profile"
        ) -> StoredMemory:
    return StoredMemory(id=mid, content=mid, cube=cube, score=score, kind=kind,  # type: ignore[arg-type]
                        source_event_ids=sources)


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
    ],
)
def test_fold_same_source(memories: list[StoredMemory], kept: list[tuple[str, list[str]]]
                          ) -> None:
    folded = fold_same_source(memories)
    assert [(m.id, m.metadata.get("covers", [])) for m in folded] == kept
