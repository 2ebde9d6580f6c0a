"""Commit positions of the query consumer over requests answered out of order.

Requests of one partition are answered concurrently and finish in any order.
The offset committed for a partition is the first request not answered yet —
never past it — or, when none is in flight, one past the last request taken.
A worker that dies therefore leaves behind only requests it had not answered
(or answered after its last commit), and the next owner starts there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from streams.wire.envelope import TPKey


class CommitPositions:
    def __init__(self) -> None:
        self._pending: dict[TPKey, set[int]] = {}
        self._next: dict[TPKey, int] = {}
        self._committed: dict[TPKey, int] = {}

    def begin(self, tp: TPKey, offset: int) -> None:
        """A request was taken (offsets of one partition are taken in order). The first
        one taken of a partition is where its committed offset stood (or where an
        uncommitted partition starts): committing that again would change nothing."""
        self._committed.setdefault(tp, offset)
        self._pending.setdefault(tp, set()).add(offset)
        self._next[tp] = max(self._next.get(tp, 0), offset + 1)

    def finish(self, tp: TPKey, offset: int) -> None:
        """The request was answered: its reply, or its dead letter, was delivered."""
        pending = self._pending.get(tp)
        if pending is not None:
            pending.discard(offset)

    def in_flight(self, tp: TPKey) -> int:
        return len(self._pending.get(tp, ()))

    def position(self, tp: TPKey) -> int | None:
        """The offset a commit may name now; None before any request was taken."""
        pending = self._pending.get(tp)
        if pending:
            return min(pending)
        return self._next.get(tp)

    def committable(self, tps: Iterable[TPKey] | None = None) -> dict[TPKey, int]:
        """Positions beyond what was committed (of ``tps``, or of every partition)."""
        out: dict[TPKey, int] = {}
        for tp in (self._next if tps is None else tps):
            pos = self.position(tp)
            if pos is not None and pos > self._committed.get(tp, -1):
                out[tp] = pos
        return out

    def committed(self, offsets: Mapping[TPKey, int]) -> None:
        """The broker accepted these offsets."""
        for tp, offset in offsets.items():
            self._committed[tp] = max(offset, self._committed.get(tp, -1))

    def committed_offset(self, tp: TPKey) -> int | None:
        return self._committed.get(tp)

    def forget(self, tps: Iterable[TPKey]) -> None:
        """Partitions let go at a rebalance: whatever was left is the next owner's."""
        for tp in tps:
            self._pending.pop(tp, None)
            self._next.pop(tp, None)
            self._committed.pop(tp, None)
