"""Which episodes the episode retention expires: pure (time is an argument).

An episode is the verbatim copy of one chat message in a cube. It may be expired
when it is *folded*: its message is still stored and its conversation's summary
covers it (``covered_until_id`` at or past the message). Then what it said is kept
in that summary (and in the facts judged from the message, which stay); the
episode itself is expired, not deleted: its row keeps its text as history, out of
every search, until an erasure deletes it. An episode not folded (its
conversation has no summary yet, or the summary stops before it, or its message
is gone) is never expired by the retention, whatever its age or its cube's size.

Of the folded episodes, one goes when its tenant's limits say so
(:class:`RetentionLimits`, a tenant's override before the default):

* ``count`` — its cube holds more valid episodes than ``max_per_cube`` and it is
  not among the newest ``max_per_cube`` of them (``rank`` 1 is the newest);
* ``age`` — it was said (its message's event time) more than ``max_age_days``
  before now.

A limit of 0 is none; with every limit 0 the retention does nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

Reason = Literal["count", "age"]


@dataclass(frozen=True)
class RetentionLimits:
    """The default limits (0: none) and each tenant's own (0 there: none for it)."""

    max_age_days: float = 0.0
    max_per_cube: int = 0
    age_overrides: Mapping[str, float] = field(default_factory=dict)
    count_overrides: Mapping[str, int] = field(default_factory=dict)

    def age_days(self, tenant: str) -> float:
        return self.age_overrides.get(tenant, self.max_age_days)

    def per_cube(self, tenant: str) -> int:
        return self.count_overrides.get(tenant, self.max_per_cube)

    @property
    def enabled(self) -> bool:
        return any(v > 0 for v in (self.max_age_days, self.max_per_cube,
                                   *self.age_overrides.values(),
                                   *self.count_overrides.values()))


@dataclass(frozen=True)
class Episode:
    """A valid episode as the retention sees it: where it is, when it was said,
    ``rank`` among its cube's valid episodes (1: the newest) and whether it is
    ``folded`` into its conversation's summary."""

    memory_id: str
    tenant_id: str
    user_id: str
    agent_id: str
    cube: str
    said_at: datetime
    rank: int
    folded: bool


def reason_to_retire(e: Episode, limits: RetentionLimits, now: datetime) -> Reason | None:
    """Why ``e`` goes now (``count`` before ``age``), or None: it stays."""
    if not e.folded:
        return None
    per_cube = limits.per_cube(e.tenant_id)
    if per_cube > 0 and e.rank > per_cube:
        return "count"
    days = limits.age_days(e.tenant_id)
    if days > 0 and e.said_at < now - timedelta(days=days):
        return "age"
    return None


def to_retire(episodes: Iterable[Episode], limits: RetentionLimits,
              now: datetime) -> list[tuple[Episode, Reason]]:
    """The episodes that go now, each with its reason, in the order given."""
    out = []
    for e in episodes:
        reason = reason_to_retire(e, limits, now)
        if reason is not None:
            out.append((e, reason))
    return out


def ranks(ids_by_scope: Mapping[int, list[int]], newer: Mapping[int, int]) -> dict[int, int]:
    """Each memory id's rank in its scope: ``newer[scope]`` valid episodes with a
    greater id than any of the scope's ``ids`` (all valid), plus those of ``ids`` at or
    above it (a greater id is a newer episode)."""
    out: dict[int, int] = {}
    for scope, ids in ids_by_scope.items():
        for i, mid in enumerate(sorted(ids, reverse=True)):
            out[mid] = newer.get(scope, 0) + i + 1
    return out
