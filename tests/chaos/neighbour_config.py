"""The noisy-neighbour run's knobs, from ``NEIGHBOUR_*`` environment variables.

The defaults are the suite's run (two phases in about four minutes on two
cores); a local run can shrink loud's session, e.g.

    NEIGHBOUR_LOUD_MESSAGES=5000 pytest tests/chaos/test_neighbour.py

and ``bench/neighbour.py`` turns loud's parts off one at a time
(``NEIGHBOUR_LOUD_MESSAGES=0``, ``NEIGHBOUR_ERASE_EVERY_S=0``,
``NEIGHBOUR_FLOOD_RATE=0``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

CALM = "calm"
LOUD = "loud"


@dataclass(frozen=True)
class NeighbourConfig:
    seconds: float = 60.0  # calm's traffic (and loud's erasures and flood) lasts this long
    calm_users: int = 20
    session_messages: int = 10  # messages of a calm session, its session_end after them
    calm_rate: float = 10.0  # calm chat events per second, all users together
    query_rate: float = 5.0  # calm queries per second, each with a real deadline
    deadline_s: float = 1.0
    loud_messages: int = 30_000  # loud's one long session; 0: none
    loud_after_s: float = 5.0  # loud begins this long after calm
    erase_every_s: float = 5.0  # loud erases one of its memories this often; 0: never
    flood_rate: float = 150.0  # loud's queries per second (its quota is 100); 0: none
    rss_limit_mb: int = 1024  # the pod's memory limit: the worker is SIGKILLed above it
    stall_s: float = 60.0  # a phase stops waiting after this long without progress
    settle_max_s: float = 240.0  # and after this long at most
    p99_floor_ms: float = 100.0  # see tests/chaos/test_neighbour.py
    delay_floor_s: float = 1.0
    margin: float = 0.20  # the 20 %

    @property
    def loud_enabled(self) -> bool:
        return self.loud_messages > 0 or self.erase_every_s > 0 or self.flood_rate > 0

    @staticmethod
    def from_env(env: dict[str, str] | None = None, **overrides: object) -> NeighbourConfig:
        env = dict(os.environ if env is None else env)
        values: dict[str, object] = {}
        for f in fields(NeighbourConfig):
            raw = env.get(f"NEIGHBOUR_{f.name.upper()}")
            if raw is not None:
                values[f.name] = type(getattr(NeighbourConfig(), f.name))(raw)
        values.update(overrides)
        return NeighbourConfig(**values)  # type: ignore[arg-type]

    def without_loud(self) -> NeighbourConfig:
        return NeighbourConfig(**{**self.__dict__, "loud_messages": 0, "erase_every_s": 0.0,
                                  "flood_rate": 0.0})

    def describe(self) -> str:
        return " ".join(f"NEIGHBOUR_{f.name.upper()}={getattr(self, f.name)}"
                        for f in fields(NeighbourConfig))
