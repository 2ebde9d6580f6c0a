"""How the query consumer fills its room for records (its free slots, and its
read-ahead when it has one): from its partitions in turn.

aiokafka hands out one partition's fetched records until they are used up. A
worker that has just taken over a killed worker's partition holds that
partition's backlog, and taking records as aiokafka hands them out would answer
the whole backlog before the fresh requests of the worker's own partitions.
:class:`TurnFetch` instead passes over the assigned partitions in turn, starting
from a different one each time, and takes at most an equal share of the free
slots from each per pass; it makes more passes while slots are free and some
partition had records, so one busy partition still gets every slot.

Every record taken is handed to ``begin`` with no await in between: a
rebalance never sees a record that was fetched but not in flight.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

POLL_MS = 200  # how long a fetch waits when no partition has records fetched


class TurnFetch:
    def __init__(self, begin: Callable[[Any], None]) -> None:
        self._begin = begin
        self._turn = 0  # the partition a fill starts from: each in turn

    async def fill(self, consumer: Any, free: int) -> None:
        """Put up to ``free`` of the records ``consumer`` has fetched in flight, in turn;
        with none fetched yet, wait up to ``POLL_MS`` for a share from any partition."""
        tps = sorted(consumer.assignment(), key=lambda tp: (tp.topic, tp.partition))
        parts = max(1, len(tps))
        first = self._turn % parts
        self._turn += 1
        tps = tps[first:] + tps[:first]
        taken = 0
        while free > 0:
            share = max(1, free // parts)
            before = taken
            for tp in tps:
                if free <= 0:
                    break
                n = self._begin_all(await consumer.getmany(tp, timeout_ms=0,
                                                           max_records=min(share, free)))
                free -= n
                taken += n
            if taken == before:
                break
        if not taken:
            self._begin_all(await consumer.getmany(timeout_ms=POLL_MS,
                                                   max_records=max(1, free // parts)))

    def _begin_all(self, batch: dict[Any, list[Any]]) -> int:
        n = 0
        for records in batch.values():
            for r in records:
                self._begin(r)
                n += 1
        return n
