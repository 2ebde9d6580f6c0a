"""A quota on a count one tenant holds at once (``cube_memories``: valid memories of a
cube; ``sessions_consolidating``: runs holding a consolidation slot), not a rate.

:meth:`CountQuota.decide` weighs what the tenant holds against its limit and counts
the decision (``memstream_quota_decisions_total{tenant,quota,decision}`` and the
tenant's :meth:`CountQuota.tally`); :meth:`CountQuota.record` counts a decision taken
elsewhere (the consolidation slots pass a run over, or start it). A limit of 0 is no
limit (``effective`` may read it otherwise: a share of 0 is half the slots). As in
:class:`~streams.quotas.book.QuotaBook`, the tallies of at most ``max_tenants``
tenants are kept, the least recently seen dropped first with their metric series.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streams.metrics import QUOTA_DECISIONS
from streams.quotas.book import ALLOWED, REFUSED


@dataclass(slots=True)
class _Counts:
    allowed: int = 0
    refused: int = 0


class CountQuota:
    def __init__(self, quota: str, default: int, overrides: Mapping[str, int] | None = None,
                 *, max_tenants: int = 10_000,
                 effective: Callable[[int], int] | None = None) -> None:
        self.quota = quota
        self.effective = effective
        self.default = default
        self.overrides = dict(overrides or {})
        self.max_tenants = max_tenants
        self._tenants: OrderedDict[str, _Counts] = OrderedDict()

    def limit(self, tenant: str) -> int:
        """The tenant's limit (0: none), as ``effective`` reads the configured one."""
        configured = self.overrides.get(tenant, self.default)
        return self.effective(configured) if self.effective else configured

    def decide(self, tenant: str, held: int) -> bool:
        """Whether one more fits beside the ``held`` the tenant holds; counted."""
        limit = self.limit(tenant)
        allowed = limit <= 0 or held < limit
        self.record(tenant, allowed)
        return allowed

    def record(self, tenant: str, allowed: bool) -> None:
        counts = self._counts(tenant)
        if allowed:
            counts.allowed += 1
        else:
            counts.refused += 1
        QUOTA_DECISIONS.labels(tenant, self.quota, ALLOWED if allowed else REFUSED).inc()

    def tally(self, tenant: str) -> tuple[int, int]:
        """(allowed, refused) counted for the tenant since it was last seen first."""
        counts = self._tenants.get(tenant) or _Counts()
        return counts.allowed, counts.refused

    def view(self, tenant: str, now: float) -> dict[str, Any]:
        """The tenant's row of ``GET /stats/quotas``."""
        limit = self.limit(tenant)
        allowed, refused = self.tally(tenant)
        return {"quota": self.quota, "limited": limit > 0, "limit": limit,
                "allowed": allowed, "refused": refused}

    def _counts(self, tenant: str) -> _Counts:
        counts = self._tenants.get(tenant)
        if counts is not None:
            self._tenants.move_to_end(tenant)
            return counts
        while len(self._tenants) >= self.max_tenants:
            gone, _ = self._tenants.popitem(last=False)
            for decision in (ALLOWED, REFUSED):
                with contextlib.suppress(KeyError):  # never counted
                    QUOTA_DECISIONS.remove(gone, self.quota, decision)
        counts = self._tenants[tenant] = _Counts()
        return counts
