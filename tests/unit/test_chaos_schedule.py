"""The chaos fault schedule: every required fault, spread over the stream, from the seed."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from tests.chaos.schedule import FIRST, LAST, fault_schedule


@pytest.mark.parametrize(
    ("kills", "expected"),
    [
        (3, {"kill_consolidating": 1, "kill": 2, "add_worker": 1, "stop_worker": 1,
             "restart_redis": 1, "restart_mariadb": 1}),
        (1, {"kill_consolidating": 1, "add_worker": 1, "stop_worker": 1, "restart_redis": 1,
             "restart_mariadb": 1}),
        (6, {"kill_consolidating": 1, "kill": 5, "add_worker": 1, "stop_worker": 1,
             "restart_redis": 1, "restart_mariadb": 1}),
    ],
)
def test_every_fault_once_and_the_kills_asked_for(kills: int, expected: dict[str, int]) -> None:
    plan = fault_schedule(7, kills=kills, redis_down_s=2.0, mariadb_down_s=4.0)
    assert Counter(f.kind for f in plan) == expected


@pytest.mark.parametrize("seed", [1, 2, 20260302])
def test_faults_are_spread_over_the_stream_in_order(seed: int) -> None:
    plan = fault_schedule(seed, kills=3, redis_down_s=2.0, mariadb_down_s=4.0)
    shares = [f.at for f in plan]
    assert shares == sorted(shares) and len(set(shares)) == len(shares)
    assert shares[0] >= FIRST and shares[-1] <= LAST
    gaps = [b - a for a, b in itertools.pairwise(shares)]
    assert min(gaps) > 0.01  # never two faults at once
    down = {f.kind: f.pause_s for f in plan if f.kind.startswith("restart")}
    assert down == {"restart_redis": 2.0, "restart_mariadb": 4.0}
    assert all(1.0 <= f.pause_s <= 3.0 for f in plan if f.kind.startswith("kill"))
    kinds = [f.kind for f in plan]
    assert kinds.index("add_worker") < kinds.index("stop_worker")


def test_the_seed_alone_decides() -> None:
    def plan(seed: int) -> list[object]:
        return list(fault_schedule(seed, kills=3, redis_down_s=2.0, mariadb_down_s=4.0))

    assert plan(5) == plan(5)
    assert plan(5) != plan(6)
