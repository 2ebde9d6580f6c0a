"""StaleSet: the in-process view of stale-history marks, compare-and-clear."""

from __future__ import annotations

from typing import Any

import pytest

from streams.session.rules.stale import Entry, StaleSet

A, B, C = ("t", "a"), ("t", "b"), ("t", "c")


def run(steps: list[tuple[Any, ...]], limit: int = 10) -> StaleSet:
    """Steps: ("fail", keys) a write failed; ("stored", id) the mark of the last
    failure is stored, ("stored_first", id) the mark of the first one;
    ("snap",) a heal takes the settled entries; ("gone", keys) / ("moved", {key: id})
    the heal found those marks gone / marked again; ("learn", [(key, id)]) marks read."""
    s = StaleSet(limit)
    begun: list[dict[tuple[str, str], Entry]] = []
    snap: dict[tuple[str, str], Entry] = {}
    for op, *args in steps:
        if op == "fail":
            begun.append(s.begin(args[0]))
        elif op == "stored":
            s.written(begun[-1], args[0])
        elif op == "stored_first":
            s.written(begun[0], args[0])
        elif op == "snap":
            snap = s.snapshot()
        elif op == "gone":
            s.settle(snap, args[0])
        elif op == "moved":
            s.settle(snap, [], args[0])
        elif op == "learn":
            s.learn(args[0])
        else:
            raise AssertionError(op)
    return s


def held(s: StaleSet) -> dict[tuple[str, str], int | None]:
    return {k: e.mark_id for k in (A, B, C) if (e := s.get(k)) is not None}


CASES = [
    ("a failed write holds its keys pending", [("fail", [A, B])], {A: None, B: None}),
    ("a stored mark gives its id", [("fail", [A]), ("stored", 7)], {A: 7}),
    ("a pending key is never forgotten",
     [("fail", [A]), ("snap",), ("gone", [A])], {A: None}),
    ("a settled key whose mark is gone is forgotten",
     [("fail", [A]), ("stored", 7), ("snap",), ("gone", [A])], {}),
    ("only the gone keys go",
     [("fail", [A, B]), ("stored", 7), ("snap",), ("gone", [A])], {B: 7}),
    ("a key marked again after the snapshot stays",
     [("fail", [A]), ("stored", 7), ("snap",), ("fail", [A]), ("stored", 8), ("gone", [A])],
     {A: 8}),
    ("a key marked again and still pending stays",
     [("fail", [A]), ("stored", 7), ("snap",), ("fail", [A]), ("gone", [A])], {A: None}),
    ("a key held after the snapshot stays",
     [("snap",), ("fail", [A]), ("stored", 7), ("gone", [A])], {A: 7}),
    ("a mark stored for an outdated failure does not overwrite the newer one",
     [("fail", [A]), ("fail", [A, B]), ("stored", 8), ("stored_first", 7)], {A: 8, B: 8}),
    ("marks read are held", [("learn", [(A, 3), (B, 4)])], {A: 3, B: 4}),
    ("a newer id read replaces a settled one",
     [("fail", [A]), ("stored", 7), ("learn", [(A, 9)])], {A: 9}),
    ("reading marks never touches a pending entry",
     [("fail", [A]), ("learn", [(A, 9)])], {A: None}),
    ("a mark marked again elsewhere takes the new id",
     [("fail", [A]), ("stored", 7), ("snap",), ("moved", {A: 9})], {A: 9}),
    ("a moved mark does not undo a change since the snapshot",
     [("fail", [A]), ("stored", 7), ("snap",), ("fail", [A]), ("stored", 8), ("moved", {A: 9})],
     {A: 8}),
    ("a learned key forgotten when its mark is gone",
     [("learn", [(A, 3)]), ("snap",), ("gone", [A])], {}),
]


@pytest.mark.parametrize(("steps", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_marks_and_compare_and_clear(steps: list[tuple[Any, ...]],
                                     expected: dict[tuple[str, str], int | None]) -> None:
    assert held(run(steps)) == expected


@pytest.mark.parametrize(
    ("steps", "expected", "overflow"),
    [
        ([("fail", [A, B, C])], {A: None, B: None}, 1),
        ([("learn", [(A, 1), (B, 2), (C, 3)])], {A: 1, B: 2}, 1),
        # a held key may always be marked again, even when the set is full
        ([("fail", [A, B]), ("stored", 5), ("fail", [B])], {A: 5, B: None}, 0),
    ],
)
def test_the_limit_bounds_what_is_held(steps: list[tuple[Any, ...]],
                                       expected: dict[tuple[str, str], int | None],
                                       overflow: int) -> None:
    s = run(steps, limit=2)
    assert held(s) == expected and s.overflow == overflow


@pytest.mark.parametrize(
    ("touched", "extra", "taken"),
    [
        ([A], 0, [A]),
        ([C], 0, []),  # not held: nothing to drop
        ([B], 1, [B, A]),  # the touched one, then the oldest other
        ([], 2, [A, B]),
        ([A, B], 5, [A, B]),
    ],
)
def test_a_write_takes_the_touched_entries_and_a_few_more(
    touched: list[tuple[str, str]], extra: int, taken: list[tuple[str, str]]
) -> None:
    s = run([("fail", [A]), ("stored", 1), ("fail", [B]), ("stored", 2)])
    assert list(s.take(touched, extra)) == taken


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        StaleSet(0)
