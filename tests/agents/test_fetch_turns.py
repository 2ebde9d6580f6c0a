"""TurnFetch against a fake consumer that hands out fetched records as aiokafka does
(one partition's until they are used up): which records go in flight, in which order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import TopicPartition

from streams.adapters.kafka.fetch_turns import POLL_MS, TurnFetch

T = "q"


@dataclass
class Fetched:
    """Records already fetched, per partition; what ``getmany`` was asked."""

    queued: dict[int, list[int]]
    calls: list[tuple[tuple[int, ...], int, int]] = field(default_factory=list)

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(T, p) for p in self.queued}

    async def getmany(self, *tps: TopicPartition, timeout_ms: int,
                      max_records: int) -> dict[TopicPartition, list[tuple[int, int]]]:
        self.calls.append((tuple(tp.partition for tp in tps), timeout_ms, max_records))
        out: dict[TopicPartition, list[tuple[int, int]]] = {}
        room = max_records
        for p in sorted(self.queued):
            if (tps and TopicPartition(T, p) not in tps) or room <= 0:
                continue
            take, self.queued[p] = self.queued[p][:room], self.queued[p][room:]
            if take:
                out[TopicPartition(T, p)] = [(p, o) for o in take]
                room -= len(take)
        return out


async def fill(queued: dict[int, list[int]], free: int, fills: int = 1) -> list[list[Any]]:
    fetched = Fetched({p: list(o) for p, o in queued.items()})
    begun: list[Any] = []
    turns = TurnFetch(begun.append)
    out = []
    for _ in range(fills):
        await turns.fill(fetched, free)
        out.append(list(begun))
        begun.clear()
    return out


@pytest.mark.parametrize(("queued", "free", "expected"), [
    # a backlog on partition 0 takes its share, not every slot
    ({0: list(range(10)), 1: [0, 1], 2: [0, 1]}, 6,
     [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]),
    # one busy partition still gets every free slot, pass after pass
    ({0: list(range(10)), 1: [], 2: []}, 6,
     [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5)]),
    # more slots than records: everything goes in flight
    ({0: [0], 1: [0, 1, 2]}, 16, [(0, 0), (1, 0), (1, 1), (1, 2)]),
    # fewer slots than partitions: a share is at least one record
    ({0: [0, 1], 1: [0, 1], 2: [0, 1]}, 2, [(0, 0), (1, 0)]),
    # an uneven split: what a partition leaves goes to the others in the next pass
    ({0: [0], 1: list(range(5))}, 4, [(0, 0), (1, 0), (1, 1), (1, 2)]),
])
async def test_one_fill_takes_a_share_from_each_partition(queued: dict[int, list[int]], free: int,
                                                    expected: list[Any]) -> None:
    assert await fill(queued, free) == [expected]


async def test_each_fill_starts_from_the_next_partition() -> None:
    first, second, third = await fill({0: [0, 1, 2], 1: [0, 1, 2], 2: [0, 1, 2]}, 1, fills=3)
    assert (first, second, third) == ([(0, 0)], [(1, 0)], [(2, 0)])


async def test_with_nothing_fetched_it_waits_for_a_share_from_any_partition() -> None:
    fetched = Fetched({0: [], 1: []})
    begun: list[Any] = []
    await TurnFetch(begun.append).fill(fetched, 8)
    assert begun == []
    assert fetched.calls[-1] == ((), POLL_MS, 4)  # a share of the free slots, no partition
    assert all(timeout == 0 for _, timeout, _ in fetched.calls[:-1])


async def test_no_partition_assigned_still_waits() -> None:
    fetched = Fetched({})
    await TurnFetch(lambda r: None).fill(fetched, 3)
    assert fetched.calls == [((), POLL_MS, 3)]
