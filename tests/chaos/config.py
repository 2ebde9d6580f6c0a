"""The chaos run's knobs, from ``CHAOS_*`` environment variables.

The defaults are the CI run (its three phases in about five minutes on two cores);
a soak is the same test with bigger numbers, e.g.

    CHAOS_SEED=7 CHAOS_CONVERSATIONS=2000 CHAOS_USERS=700 CHAOS_RATE=250 CHAOS_KILLS=10 \
        make test-chaos

Everything random (the workload, the queries, the fault schedule) follows from
``CHAOS_SEED``: a failing run is repeated by running it again with its seed,
which the report prints first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class WorkloadSpec:
    """What the generator builds (see :mod:`tests.chaos.workload`)."""

    seed: int = 20260302
    conversations: int = 300
    users: int = 110
    tenants: int = 3
    agents_per_tenant: int = 3
    max_sessions: int = 3
    max_turns: int = 5  # user/assistant pairs per session: 2..max_turns
    active: int = 40  # conversations in progress at any point of the stream
    linked_pairs: int = 20  # concurrent sessions of one user stating the same fact
    poison: bool = True
    odd_ids: bool = True  # case and look-alike twins, 255-character ids (tests.chaos.subjects)
    group_chats: int = 2  # conversations of two users
    erasures: bool = True  # erasures in the disturbed phase (needs 2 group chats)
    returning: int = 8  # conversations whose last session comes at the end of the stream


@dataclass(frozen=True)
class ChaosConfig:
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    rate: float = 130.0  # chat events per second in the disturbed phase
    erasure_rate: float = 260.0  # in the erasures phase (no deadline callers there)
    query_rate: float = 5.0  # memory queries per second in the disturbed phase
    deadline_rate: float = 2.0  # per second, each class of deadline callers (1 s, 300 ms)
    workers: int = 2  # workers the disturbed phase starts with
    kills: int = 3  # SIGKILLs in the disturbed phase, one of them mid-consolidation
    redis_down_s: float = 2.0
    mariadb_down_s: float = 4.0
    stall_s: float = 60.0  # a phase stops waiting after this long without progress
    settle_max_s: float = 240.0  # and after this long at most

    @staticmethod
    def from_env(env: dict[str, str] | None = None) -> ChaosConfig:
        env = dict(os.environ if env is None else env)
        wl = _read(WorkloadSpec, env)
        top = _read(ChaosConfig, env, skip=frozenset({"workload"}))
        return ChaosConfig(workload=WorkloadSpec(**wl), **top)

    def describe(self) -> str:
        parts = [f"CHAOS_{f.name.upper()}={getattr(self.workload, f.name)}"
                 for f in fields(WorkloadSpec)]
        parts += [f"CHAOS_{f.name.upper()}={getattr(self, f.name)}"
                  for f in fields(ChaosConfig) if f.name != "workload"]
        return " ".join(parts)


def _read(cls: type[Any], env: dict[str, str],
          skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(cls):
        raw = env.get(f"CHAOS_{f.name.upper()}")
        if f.name in skip or raw is None:
            continue
        kind = type(getattr(cls(), f.name))
        if kind is bool:
            out[f.name] = raw.strip().lower() in {"1", "true", "yes", "on"}
        else:
            out[f.name] = kind(raw)
    return out
