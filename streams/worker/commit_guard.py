"""CommitGuard: memstream's own record of what may be committed, per partition.

Faust decides which offset to commit from the acknowledgements it saw, and it
counts a jump in the offsets it delivered as a gap that is *acknowledged*
(``_add_gap`` / ``_new_offset`` in ``faust/transport/consumer.py``): a record
that was fetched but never reached an agent is then committed as if handled.
The guard keeps what memstream itself knows, and the commit never passes it:

* ``received(tp, offsets)`` — the records the Kafka client handed to Faust, in
  fetch order. Offsets the client never returns (transaction markers,
  compacted records) are not records and are never waited for.
* ``finished(tp, offset)`` — memstream stored or dead-lettered the record.
* ``safe(tp)`` — the lowest offset received and not finished; when every
  received record is finished, the offset after the last one. Nothing below
  it is unfinished, so committing up to it loses nothing.
* ``clamp(offsets)`` lowers each offset Faust wants to commit to ``safe``;
  every lowering is a *refused gap*: a record Faust counted as handled that
  memstream had not finished. It is reported, never committed. A partition
  with nothing received since its reset is left out (nothing is safe yet).
* ``admit(tp, offset)`` — the record reaches memstream in order: every record
  received before it on its partition has reached memstream too. A record
  Faust delivers after passing over an earlier one is not admitted: the stage
  leaves it alone (its state never moves past a record it has not seen), and
  the partition is delivered again from the guarded commit (``holes``).
* ``skipped(tp)`` — for partitions whose records are finished in order (every
  stage but the retry scheduler and consolidation, whose topics are declared
  out of order: ``out_of_order_topics`` in ``streams.worker.faust_glue``): an
  unfinished record below a finished one was passed over, not merely in
  flight; the worker then has the partition delivered again. A record a stage
  holds back on purpose (``hold(tp, offset)``, until ``unhold``: the ingest
  intake's events over their tenant's quota) is not passed over; once unheld
  and still unfinished, it is again.

``reset(tps)`` starts a partition afresh (after an assignment or a seek to the
committed offsets: what was in flight is delivered again); a record fetched
before the reset and delivered after it is not admitted. A fetch that goes
back below the last offset received is a seek too, and resets the partition.
Finishing a record that is not pending (a stale acknowledgement from before a
reset) changes nothing.

Thread-safe: the Kafka client runs in its own thread; the agents acknowledge
on the event loop.
"""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streams.wire.envelope import TPKey


@dataclass(frozen=True)
class Refusal:
    """Faust wanted to commit ``wanted``; only ``allowed`` was safe."""

    tp: TPKey
    wanted: int
    allowed: int


@dataclass
class _Partition:
    pending: deque[int] = field(default_factory=deque)  # received, in order
    unfinished: set[int] = field(default_factory=set)
    undelivered: deque[int] = field(default_factory=deque)  # received, not admitted yet
    last_received: int | None = None
    last_finished: int = -1
    hole: int | None = None  # a received record passed over at delivery
    held: set[int] = field(default_factory=set)  # unfinished on purpose (hold)
    # unfinished and not held, lowest first; finished and held ones left in, skipped lazily
    open: list[int] = field(default_factory=list)

    def received(self, offsets: Iterable[int]) -> None:
        for offset in offsets:
            if self.last_received is not None and offset <= self.last_received:
                self.pending.clear()  # a seek back: what follows is delivered again
                self.unfinished.clear()
                self.undelivered.clear()
                self.held.clear()
                self.open.clear()
                self.last_finished = -1
                self.hole = None
            self.pending.append(offset)
            self.unfinished.add(offset)
            self.undelivered.append(offset)
            self.open.append(offset)  # the highest yet: still a heap
            self.last_received = offset

    def hold(self, offset: int) -> None:
        if offset in self.unfinished:
            self.held.add(offset)

    def unhold(self, offset: int) -> None:
        if offset in self.held:
            self.held.discard(offset)
            heapq.heappush(self.open, offset)

    def admit(self, offset: int) -> bool:
        undelivered = self.undelivered
        if not undelivered or offset < undelivered[0]:
            return True  # delivered before (a redelivery), or not tracked
        if offset == undelivered[0]:
            undelivered.popleft()
            return True
        if self.hole is None:
            self.hole = undelivered[0]
        return False

    def finished(self, offset: int) -> None:
        if offset not in self.unfinished:
            return  # stale: from before a reset
        self.unfinished.discard(offset)
        self.held.discard(offset)
        self.last_finished = max(self.last_finished, offset)
        pending = self.pending
        while pending and pending[0] not in self.unfinished:
            pending.popleft()

    def skipped(self) -> int | None:
        """The lowest unfinished record not held when a later one is finished."""
        open_ = self.open
        while open_ and (open_[0] not in self.unfinished or open_[0] in self.held):
            heapq.heappop(open_)
        if open_ and open_[0] < self.last_finished:
            return open_[0]
        return None

    def safe(self) -> int | None:
        if self.pending:
            return self.pending[0]
        return None if self.last_received is None else self.last_received + 1


class CommitGuard:
    def __init__(self) -> None:
        self._parts: dict[TPKey, _Partition] = {}
        self._lock = threading.Lock()
        self.refused = 0

    def received(self, tp: TPKey, offsets: Iterable[int]) -> None:
        with self._lock:
            part = self._parts.get(tp)
            if part is None:
                part = self._parts[tp] = _Partition()
            part.received(offsets)

    def finished(self, tp: TPKey, offset: int) -> None:
        with self._lock:
            part = self._parts.get(tp)
            if part is not None:
                part.finished(offset)

    def safe(self, tp: TPKey) -> int | None:
        with self._lock:
            part = self._parts.get(tp)
            return None if part is None else part.safe()

    def reset(self, tps: Iterable[TPKey] | None = None) -> None:
        """Forget ``tps`` (every partition when None)."""
        with self._lock:
            if tps is None:
                self._parts.clear()
                return
            for tp in tps:
                self._parts.pop(tp, None)

    def clamp(self, offsets: Mapping[TPKey, int]) -> tuple[dict[TPKey, int], list[Refusal]]:
        """The offsets that may be committed (each at most ``safe``; partitions
        with nothing safe left out), and the refused gaps."""
        allowed: dict[TPKey, int] = {}
        refused: list[Refusal] = []
        with self._lock:
            for tp, wanted in offsets.items():
                part = self._parts.get(tp)
                bound = None if part is None else part.safe()
                if bound is not None and wanted <= bound:
                    allowed[tp] = wanted
                    continue
                if bound is None:
                    continue  # nothing received since the reset: nothing is safe yet
                refused.append(Refusal(tp, wanted, bound))
                allowed[tp] = bound
            self.refused += len(refused)
        return allowed, refused

    def skipped(self, tp: TPKey) -> int | None:
        """For a partition whose records are finished in order: the record that
        was passed over (a later one is finished, it is not), else None."""
        with self._lock:
            part = self._parts.get(tp)
            return None if part is None else part.skipped()

    def all_skipped(self) -> dict[TPKey, int]:
        """:meth:`skipped` of every partition that has one."""
        with self._lock:
            found = {tp: part.skipped() for tp, part in self._parts.items()}
        return {tp: offset for tp, offset in found.items() if offset is not None}

    def hold(self, tp: TPKey, offset: int) -> None:
        """The record at ``offset`` is unfinished on purpose: not passed over."""
        with self._lock:
            part = self._parts.get(tp)
            if part is not None:
                part.hold(offset)

    def unhold(self, tp: TPKey, offset: int) -> None:
        """The record at ``offset`` is no longer held (taken in, or let go)."""
        with self._lock:
            part = self._parts.get(tp)
            if part is not None:
                part.unhold(offset)

    def admit(self, tp: TPKey, offset: int) -> bool:
        """Whether the record at ``offset`` reaches memstream in order (see the
        module docstring). A record of a partition with nothing received since
        its reset is not: it was fetched before the partition was revoked or
        assigned again (held in a stream's buffer meanwhile), and the partition
        is delivered again from the committed offset, in order."""
        with self._lock:
            part = self._parts.get(tp)
            return False if part is None else part.admit(offset)

    def holes(self) -> dict[TPKey, int]:
        """Partitions on which Faust passed over a record at delivery: its offset."""
        with self._lock:
            return {tp: p.hole for tp, p in self._parts.items() if p.hole is not None}

    def pending(self, tp: TPKey) -> int:
        """Records of ``tp`` received and not finished."""
        with self._lock:
            part = self._parts.get(tp)
            return 0 if part is None else len(part.unfinished)
