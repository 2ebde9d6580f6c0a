"""The commit guard: what may be committed, whatever Faust counted as handled."""

from __future__ import annotations

import pytest

from streams.worker.commit_guard import CommitGuard, Refusal

TP = ("chat", 0)

# (received batches, finished offsets, expected safe, expected skipped)
CASES = [
    ([], [], None, None),
    ([[0, 1, 2]], [], 0, None),
    ([[0, 1, 2]], [0, 1], 2, None),
    ([[0, 1, 2]], [0, 1, 2], 3, None),
    # offsets the client never returns (transaction markers) are not waited for
    ([[5, 6, 8, 9]], [5, 6, 8, 9], 10, None),
    ([[5, 6, 8, 9]], [5, 6, 9], 8, 8),
    # a record passed over: later ones finished, it was not
    ([[0, 1, 2, 3]], [0, 2, 3], 1, 1),
    # finished out of order, all done in the end
    ([[0, 1, 2, 3]], [3, 1, 0, 2], 4, None),
    # two fetches continue each other
    ([[0, 1], [2, 3]], [0, 1, 2], 3, None),
    # a fetch below the last one received is a seek back: start again
    ([[0, 1, 2, 3], [1, 2]], [0], 1, None),
    ([[0, 1, 2, 3], [1, 2]], [1, 2], 3, None),
    # a stale finish (not pending) changes nothing
    ([[10, 11]], [3, 10], 11, None),
]


@pytest.mark.parametrize(("batches", "finished", "safe", "skipped"), CASES)
def test_safe_and_skipped(batches: list[list[int]], finished: list[int], safe: int | None,
                          skipped: int | None) -> None:
    g = CommitGuard()
    for b in batches:
        g.received(TP, b)
    for o in finished:
        g.finished(TP, o)
    assert g.safe(TP) == safe
    assert g.skipped(TP) == skipped


# (received, held on purpose, finished, skipped while held, unheld, safe, skipped after)
HELD = [
    # a record held below finished ones is not passed over; the commit stays below it
    ([0, 1, 2, 3], [1], [0, 2, 3], None, [], 1, None),
    # held, then finished: all done (finishing forgets the hold)
    ([0, 1, 2, 3], [1], [0, 2, 3, 1], None, [1], 4, None),
    # released (unheld) and still unfinished: passed over again
    ([0, 1, 2, 3], [1], [0, 2, 3], None, [1], 1, 1),
    # a held record does not hide one passed over above it
    ([0, 1, 2, 3, 4], [1], [0, 3, 4], 2, [], 1, 2),
    # holding a record not pending changes nothing
    ([0, 1, 2], [7], [0, 2], 1, [], 1, 1),
]


@pytest.mark.parametrize(
    ("received", "held", "finished", "while_held", "unheld", "safe", "skipped"), HELD)
def test_records_held_on_purpose(received: list[int], held: list[int], finished: list[int],
                                 while_held: int | None, unheld: list[int], safe: int,
                                 skipped: int | None) -> None:
    g = CommitGuard()
    g.received(TP, received)
    for o in held:
        g.hold(TP, o)
    for o in finished:
        g.finished(TP, o)
    assert g.skipped(TP) == while_held
    for o in unheld:
        g.unhold(TP, o)
    assert (g.safe(TP), g.skipped(TP)) == (safe, skipped)


def test_a_seek_back_forgets_what_was_held() -> None:
    g = CommitGuard()
    g.received(TP, [0, 1, 2])
    g.hold(TP, 1)
    g.received(TP, [1, 2])  # delivered again from 1
    g.finished(TP, 2)
    assert g.skipped(TP) == 1  # the copy delivered again is not held


# (received, finished, Faust wants, allowed, refusals)
CLAMPS = [
    ([0, 1, 2], [0, 1, 2], 3, 3, []),
    ([0, 1, 2], [0, 1, 2], 2, 2, []),
    # Faust's gap accounting counted 1 as handled
    ([0, 1, 2, 3], [0, 2, 3], 4, 1, [Refusal(TP, 4, 1)]),
    ([0, 1, 2], [], 3, 0, [Refusal(TP, 3, 0)]),
]


@pytest.mark.parametrize(("received", "finished", "wanted", "allowed", "refusals"), CLAMPS)
def test_clamp(received: list[int], finished: list[int], wanted: int, allowed: int,
               refusals: list[Refusal]) -> None:
    g = CommitGuard()
    g.received(TP, received)
    for o in finished:
        g.finished(TP, o)
    assert g.clamp({TP: wanted}) == ({TP: allowed}, refusals)
    assert g.refused == len(refusals)


def test_nothing_received_since_a_reset_is_left_out_without_a_refusal() -> None:
    g = CommitGuard()
    g.received(TP, [0, 1])
    g.finished(TP, 0)
    g.reset([TP])
    g.finished(TP, 1)  # stale, from before the reset
    assert g.clamp({TP: 2}) == ({}, [])
    assert g.pending(TP) == 0


def test_reset_forgets_only_the_partitions_named() -> None:
    g = CommitGuard()
    other = ("chat", 1)
    g.received(TP, [0])
    g.received(other, [7])
    g.reset([TP])
    assert g.safe(TP) is None
    assert g.safe(other) == 7
    g.reset()
    assert g.safe(other) is None


def test_partitions_are_independent() -> None:
    g = CommitGuard()
    a, b = ("chat", 0), ("idle", 0)
    g.received(a, [0, 1])
    g.received(b, [0, 1])
    g.finished(a, 0)
    g.finished(a, 1)
    assert g.clamp({a: 2, b: 2}) == ({a: 2, b: 0}, [Refusal(b, 2, 0)])


# received batches, offsets offered in order, expected admitted, expected hole
ADMIT = [
    ([[0, 1, 2]], [0, 1, 2], [True, True, True], None),
    # transaction markers are not records: 5, 6, 8 follow each other
    ([[5, 6, 8]], [5, 6, 8], [True, True, True], None),
    # 1 passed over: 2 and everything after it waits for the partition to come again
    ([[0, 1, 2, 3]], [0, 2, 3], [True, False, False], 1),
    # a redelivery of what was admitted is admitted again
    ([[0, 1, 2]], [0, 1, 0, 1, 2], [True, True, True, True, True], None),
    # a seek back (the partition delivered again) starts afresh, the hole gone
    ([[0, 1, 2], [1, 2]], [0, 1, 2], [True, True, True], None),
]


@pytest.mark.parametrize(("batches", "offered", "admitted", "hole"), ADMIT)
def test_admit_lets_records_through_in_order_only(batches: list[list[int]], offered: list[int],
                                                  admitted: list[bool], hole: int | None) -> None:
    g = CommitGuard()
    for b in batches:
        g.received(TP, b)
    assert [g.admit(TP, o) for o in offered] == admitted
    assert g.holes() == ({} if hole is None else {TP: hole})


def test_a_partition_delivered_again_after_a_hole_is_admitted_from_the_start() -> None:
    g = CommitGuard()
    g.received(TP, [0, 1, 2, 3])
    assert g.admit(TP, 0) and not g.admit(TP, 2)
    g.received(TP, [1, 2, 3])  # the partition read again from the held commit
    assert [g.admit(TP, o) for o in (1, 2, 3)] == [True, True, True] and g.holes() == {}


def test_a_record_fetched_before_a_reset_is_not_admitted_after_it() -> None:
    """A rebalance resets the partition while records fetched before it wait in a
    stream's buffer: delivered now, they would overtake the records before them
    that the partition delivers again from the committed offset."""
    g = CommitGuard()
    g.received(TP, [3, 4, 5, 11, 12])
    assert g.admit(TP, 3)
    g.reset([TP])  # revoked and assigned again; the commit is held at 4
    assert [g.admit(TP, o) for o in (11, 12)] == [False, False]
    g.received(TP, [4, 5, 11, 12])  # delivered again from the committed offset
    assert [g.admit(TP, o) for o in (4, 5, 11, 12)] == [True, True, True, True]


def test_a_partition_never_received_admits_nothing() -> None:
    assert not CommitGuard().admit(TP, 0)
