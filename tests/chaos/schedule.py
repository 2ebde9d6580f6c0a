"""The disturbed phase's faults: which, in what order, and where in the stream.

Pure and derived from the seed only, so a failing run is repeated exactly by
its seed. A fault is due when a share ``at`` of the workload has been
published: tied to the stream rather than the clock, it lands in the same
neighbourhood of events on a fast machine and a slow one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

FaultKind = Literal["kill", "kill_consolidating", "add_worker", "stop_worker",
                    "restart_redis", "restart_mariadb"]
FIRST, LAST = 0.08, 0.88  # faults land between these shares of the stream


@dataclass(frozen=True)
class Fault:
    at: float  # share of the workload published when it is due
    kind: FaultKind
    pick: int  # the worker it hits: index into the live workers, modulo their number
    pause_s: float  # how long the killed worker, Redis or MariaDB stays down

    def describe(self) -> str:
        pause = f", down {self.pause_s:.1f}s" if self.pause_s else ""
        return f"{self.kind} at {self.at:.0%} (pick {self.pick}{pause})"


def fault_schedule(seed: int, *, kills: int, redis_down_s: float,
                   mariadb_down_s: float) -> list[Fault]:
    """``kills`` SIGKILLs (the first kind ``kill_consolidating``: it waits for a
    consolidation in flight and kills the worker running it), one worker added,
    later one stopped with SIGTERM, Redis and MariaDB restarted once each; shuffled
    and spread over the stream with some jitter."""
    rng = random.Random(f"faults-{seed}")
    aimed: list[FaultKind] = ["kill_consolidating"] * min(kills, 1)
    plain: list[FaultKind] = ["kill"] * max(kills - 1, 0)
    kinds = aimed + plain
    once: list[FaultKind] = ["add_worker", "stop_worker", "restart_redis", "restart_mariadb"]
    kinds += once
    rng.shuffle(kinds)
    add, stop = kinds.index("add_worker"), kinds.index("stop_worker")
    if stop < add:  # a worker added, later one stopped: the group grows, then shrinks
        kinds[add], kinds[stop] = "stop_worker", "add_worker"
    span = (LAST - FIRST) / len(kinds)
    out = []
    for i, kind in enumerate(kinds):
        at = FIRST + span * (i + rng.uniform(0.1, 0.9))
        pause = {"kill": rng.uniform(1.0, 3.0), "kill_consolidating": rng.uniform(1.0, 3.0),
                 "restart_redis": redis_down_s, "restart_mariadb": mariadb_down_s}.get(kind, 0.0)
        out.append(Fault(round(at, 4), kind, rng.randrange(1000), round(pause, 2)))
    return out
