"""Commit positions over requests answered out of order."""

from __future__ import annotations

import pytest

from streams.adapters.kafka.commit_positions import CommitPositions

P0, P1 = ("q", 0), ("q", 1)


@pytest.mark.parametrize(
    ("case", "taken", "answered", "position"),
    [
        ("nothing taken", [], [], None),
        ("all in flight", [5, 6, 7], [], 5),
        ("answered in order", [5, 6, 7], [5, 6], 7),
        ("all answered", [5, 6, 7], [7, 5, 6], 8),
        ("a later one first: never past the first unanswered", [5, 6, 7], [7, 6], 5),
        ("a gap in the offsets (compaction, transactions)", [5, 9, 12], [5, 9], 12),
        ("the first unanswered in the middle", [1, 2, 3, 4], [1, 2, 4], 3),
    ],
)
def test_position_is_the_first_request_not_answered(case: str, taken: list[int],
                                                    answered: list[int],
                                                    position: int | None) -> None:
    p = CommitPositions()
    for offset in taken:
        p.begin(P0, offset)
    for offset in answered:
        p.finish(P0, offset)
    assert p.position(P0) == position, case
    assert p.in_flight(P0) == len(taken) - len(answered)


def test_only_positions_beyond_the_last_commit_are_committable() -> None:
    p = CommitPositions()
    p.begin(P0, 0)
    p.begin(P1, 10)
    assert p.committable() == {}  # nothing answered: the first waits where it started
    assert p.committed_offset(P1) == 10
    p.finish(P0, 0)
    assert p.committable() == {P0: 1}
    p.committed({P0: 1, P1: 10})
    assert p.committable() == {}
    p.begin(P0, 1)
    p.finish(P0, 1)
    assert p.committable() == {P0: 2}
    assert p.committable([P1]) == {}
    p.committed({P0: 1})  # an older commit answered late moves nothing back
    assert p.committed_offset(P0) == 1 and p.committable() == {P0: 2}


def test_forgotten_partitions_start_over() -> None:
    p = CommitPositions()
    p.begin(P0, 3)
    p.committed({P0: 3})
    p.forget([P0])
    assert p.position(P0) is None and p.committed_offset(P0) is None
    assert p.committable() == {}
    p.begin(P0, 3)  # ours again, from the committed offset
    p.finish(P0, 3)
    assert p.committable() == {P0: 4}


def test_finishing_an_unknown_offset_changes_nothing() -> None:
    p = CommitPositions()
    p.finish(P0, 4)
    p.begin(P0, 5)
    p.finish(P0, 4)
    assert p.position(P0) == 5
