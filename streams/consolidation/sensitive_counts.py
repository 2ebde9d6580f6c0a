"""SensitiveCounts: this worker's counts of sensitive content per tenant, kind and
action, since it started, for ``GET /stats/sensitive``.

:class:`~.screening.Screening` adds one count for each kind a memory it screened held
(a fact, an episode or a summary; a memory holding several kinds counts once for
each), with the action taken: what ``memstream_sensitive_memories_total`` counts, but
by the tenant's own id, so that a tenant reads its own counts and no other's (the
metric's ``other`` sums the tenants the settings do not name).

Bounded: the kinds (:class:`~.rules.sensitive.kinds.Kind`) and actions
(:class:`~.rules.sensitive.policy.Action`) are closed sets, and at most
``max_tenants`` tenants are kept, the least recently counted forgotten first (a
tenant forgotten starts again from zero). Prometheus sums the workers and keeps the
history; this book is one worker's, in memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import Action

MAX_TENANTS = 10_000
_KINDS = tuple(Kind)
_ACTIONS = tuple(Action)
_SLOTS = len(_KINDS) * len(_ACTIONS)
_SLOT = {(k, a): i * len(_ACTIONS) + j for i, k in enumerate(_KINDS)
         for j, a in enumerate(_ACTIONS)}


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SensitiveCounts:
    """Counts per tenant, kind and action (one fixed-size row of counters per tenant)."""

    def __init__(self, *, max_tenants: int = MAX_TENANTS,
                 clock: Callable[[], float] = time.time) -> None:
        """``max_tenants`` >= 1: the tenants kept; ``clock`` gives the start time shown."""
        if max_tenants < 1:
            raise ValueError("max_tenants must be at least 1")
        self.max_tenants = max_tenants
        self.since = clock()
        self._tenants: OrderedDict[str, list[int]] = OrderedDict()

    def add(self, tenant_id: str, kind: Kind, action: Action, n: int = 1) -> None:
        """Count ``n`` (>= 0) memories of ``tenant_id`` that held ``kind``, on which
        ``action`` was taken."""
        if n <= 0:
            return
        row = self._tenants.get(tenant_id)
        if row is None:
            row = self._tenants[tenant_id] = [0] * _SLOTS
            while len(self._tenants) > self.max_tenants:
                self._tenants.popitem(last=False)
        else:
            self._tenants.move_to_end(tenant_id)
        row[_SLOT[(kind, action)]] += n

    def count(self, tenant_id: str, kind: Kind, action: Action) -> int:
        row = self._tenants.get(tenant_id)
        return row[_SLOT[(kind, action)]] if row is not None else 0

    @property
    def tenants(self) -> int:
        """How many tenants are kept now."""
        return len(self._tenants)

    def view(self, tenant_id: str) -> dict[str, Any]:
        """The tenant's counts (``docs/stats-api.yaml``, ``Sensitive``): every kind with
        every action, zeros included, and the totals per action; a tenant never
        counted (or forgotten) has zeros."""
        row = self._tenants.get(tenant_id) or [0] * _SLOTS
        kinds = {k.value: {a.value: row[_SLOT[(k, a)]] for a in _ACTIONS} for k in _KINDS}
        total = {a.value: sum(kinds[k.value][a.value] for k in _KINDS) for a in _ACTIONS}
        return {"tenant": tenant_id, "since": _iso(self.since), "kinds": kinds, "total": total}
