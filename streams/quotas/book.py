"""One rate quota (``queries``, ``events``, ``erasures``) of every tenant on this worker.

:meth:`QuotaBook.take` decides a request of a tenant and counts the decision
(``memstream_quota_decisions_total{tenant,quota,decision}``: ``allowed``, or the
quota's name for a refusal, ``refused_as`` — ``refused`` for queries,
``dead_lettered`` for events — and the tenant's own tally, :meth:`QuotaBook.tally`);
a tenant may have its own (``refused_as_for``: the events of a tenant whose events
over the quota are ``delayed``, counted by :mod:`streams.ingest.pacing` through
:meth:`QuotaBook.count`);
:meth:`QuotaBook.shed` counts a request refused without being weighed (``shed``: the
query consumer had more of the tenant's requests waiting than it may queue);
:meth:`QuotaBook.give_back` returns the token of a request taken and not served
after all; :meth:`QuotaBook.peek` only tells what it would decide, counting nothing. Memory
is bounded: the bucket and tally of at most ``max_tenants`` tenants are kept,
the least recently seen dropped first
(with its metric series); a tenant dropped and seen again starts with a full
bucket, its counts from zero.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streams.metrics import QUOTA_DECISIONS
from streams.quotas.rules import Bucket, Limit, given_back, peek, take

ALLOWED, REFUSED, DEAD_LETTERED, SHED = "allowed", "refused", "dead_lettered", "shed"
DELAYED = "delayed"
OVERLOADED = "overloaded"  # a query refused: the worker loaded, its tenant heavy


@dataclass(frozen=True, slots=True)
class Decision:
    """What a request of ``tenant`` gets: allowed, or refused with the seconds until
    its quota lets one through; ``message`` says which quota, and when to retry."""

    quota: str
    tenant: str
    allowed: bool
    limit: Limit
    retry_after_s: float = 0.0
    unit_s: float = 1.0  # the unit of the rate in messages: 1 (a second) or 60 (a minute)

    @property
    def message(self) -> str:
        if self.allowed:
            return ""
        unit = {1.0: "second", 60.0: "minute"}.get(self.unit_s, f"{self.unit_s:g} s")
        return (f"over the {self.quota} quota of tenant {self.tenant!r} "
                f"({self.limit.rate * self.unit_s:g} a {unit}, {self.limit.burst:g} at once): "
                f"retry in {max(self.retry_after_s, 0.001):.3f} s")


@dataclass(slots=True)
class _Entry:
    bucket: Bucket | None = None
    allowed: int = 0
    refused: int = 0
    delayed: int = 0


@dataclass(frozen=True, slots=True)
class Tally:
    """A tenant's quota on this worker: its limit, tokens left now, and the decisions
    counted since it was last seen first."""

    limit: Limit
    tokens: float
    allowed: int
    refused: int
    delayed: int = 0


class QuotaBook:
    def __init__(self, quota: str, default: Limit, overrides: Mapping[str, Limit] | None = None,
                 *, max_tenants: int = 10_000, unit_s: float = 1.0,
                 refused_as: str = REFUSED,
                 refused_as_for: Mapping[str, str] | None = None) -> None:
        self.quota = quota
        self.refused_as = refused_as
        self.refused_as_for = dict(refused_as_for or {})
        self.default = default
        self.overrides = dict(overrides or {})
        self.max_tenants = max_tenants
        self.unit_s = unit_s
        self._tenants: OrderedDict[str, _Entry] = OrderedDict()

    def limit(self, tenant: str) -> Limit:
        return self.overrides.get(tenant, self.default)

    def __len__(self) -> int:
        return len(self._tenants)

    def over_quota(self, tenant: str) -> str:
        """What becomes of a request of ``tenant`` over the quota (its decision label)."""
        return self.refused_as_for.get(tenant, self.refused_as)

    def take(self, tenant: str, now: float, *, count: bool = True) -> Decision:
        """Decide a request of ``tenant`` at ``now`` (seconds), and count the decision
        (``count=False``: the caller counts it, :meth:`count`)."""
        limit = self.limit(tenant)
        entry = self._entry(tenant)
        verdict = take(entry.bucket, limit, now)
        entry.bucket = verdict.bucket
        if count:
            self.count(tenant, ALLOWED if verdict.allowed else self.over_quota(tenant))
        return Decision(self.quota, tenant, verdict.allowed, limit, verdict.retry_after_s,
                        self.unit_s)

    def give_back(self, tenant: str, now: float) -> None:
        """Return the token an uncounted :meth:`take` (``count=False``) took for a request
        of ``tenant`` that was not served after all (another worker had answered it).
        A tenant forgotten meanwhile (a full bucket when seen again) gets nothing back,
        and the tenants' order of last use is left as it is."""
        entry = self._tenants.get(tenant)
        if entry is not None:
            entry.bucket = given_back(entry.bucket, self.limit(tenant), now)

    def count(self, tenant: str, decision: str) -> None:
        """Count a decision about a request of ``tenant``: ``allowed``, ``delayed``
        (held back to be taken later), or a refusal."""
        entry = self._entry(tenant)
        if decision == ALLOWED:
            entry.allowed += 1
        elif decision == DELAYED:
            entry.delayed += 1
        else:
            entry.refused += 1
        QUOTA_DECISIONS.labels(tenant, self.quota, decision).inc()

    def shed(self, tenant: str) -> None:
        """Count a request of ``tenant`` refused without being weighed (decision ``shed``,
        and a refusal in its tally); its bucket is left as it was."""
        self._entry(tenant).refused += 1
        QUOTA_DECISIONS.labels(tenant, self.quota, SHED).inc()

    def peek(self, tenant: str, now: float) -> Decision:
        """What :meth:`take` would decide now; nothing is taken, counted or remembered."""
        limit = self.limit(tenant)
        entry = self._tenants.get(tenant)
        verdict = peek(entry.bucket if entry else None, limit, now)
        return Decision(self.quota, tenant, verdict.allowed, limit, verdict.retry_after_s,
                        self.unit_s)

    def tally(self, tenant: str, now: float) -> Tally:
        """The tenant's limit and what was decided for it (zeros for a tenant not seen)."""
        limit = self.limit(tenant)
        entry = self._tenants.get(tenant) or _Entry()
        tokens = peek(entry.bucket, limit, now).bucket.tokens
        return Tally(limit, tokens, entry.allowed, entry.refused, entry.delayed)

    def view(self, tenant: str, now: float) -> dict[str, Any]:
        """The tenant's row of ``GET /stats/quotas``."""
        t = self.tally(tenant, now)
        return {"quota": self.quota, "limited": not t.limit.unlimited,
                "rate": t.limit.rate * self.unit_s, "per_s": self.unit_s,
                "burst": t.limit.burst, "available": round(t.tokens, 3),
                "allowed": t.allowed, "refused": t.refused, "delayed": t.delayed,
                "over_quota": self.over_quota(tenant)}

    def _entry(self, tenant: str) -> _Entry:
        entry = self._tenants.get(tenant)
        if entry is not None:
            self._tenants.move_to_end(tenant)
            return entry
        while len(self._tenants) >= self.max_tenants:
            gone, _ = self._tenants.popitem(last=False)
            for decision in {ALLOWED, REFUSED, DEAD_LETTERED, DELAYED, SHED, OVERLOADED,
                             self.over_quota(gone)}:
                with contextlib.suppress(KeyError):  # never counted
                    QUOTA_DECISIONS.remove(gone, self.quota, decision)
        entry = self._tenants[tenant] = _Entry()
        return entry
