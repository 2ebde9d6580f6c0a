"""The quotas of one process, from the settings: each quota's defaults and every
tenant's overrides (``quotas.tenant_overrides``), as plain values for the stages.

* ``queries`` — a second, taken by the query processors;
* ``load`` — the queries answered lately per tenant: under load, a tenant with most
  of them is refused (:mod:`streams.quotas.load_share`);
* ``events`` — chat events a second into ingest (none when no tenant has a limit),
  those over it delayed (:mod:`streams.ingest.pacing`) or dead-lettered per tenant;
* ``erasures`` — a minute, taken by the erasure processor for each new erasure;
* ``cube_memories`` — valid memories of a cube before consolidation adds no episodes;
* ``sessions_consolidating`` — consolidation slots one tenant's runs hold at once
  (default ``consolidation.tenant_share``);
* the episode retention of each tenant (``consolidation.episode_max_age_days``,
  ``consolidation.episodes_max_per_cube``), not a quota but overridden per tenant the
  same way.

One :class:`Quotas` per process: the processors take from its books and
``GET /stats/quotas`` reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streams.consolidation.rules.episode_retention import RetentionLimits
from streams.consolidation.rules.fairness import tenant_share
from streams.quotas.book import DEAD_LETTERED, DELAYED, QuotaBook
from streams.quotas.counts import CountQuota
from streams.quotas.load_share import LoadShare
from streams.quotas.rules import Limit
from streams.settings import Settings
from streams.stats.service import QuotaView


@dataclass
class Quotas:
    queries: QuotaBook
    load: LoadShare
    events: QuotaBook | None
    erasures: QuotaBook
    cube_memories: CountQuota
    sessions_consolidating: CountQuota
    retention: RetentionLimits

    def views(self) -> dict[str, QuotaView]:
        """Every quota by name, as ``GET /stats/quotas`` shows them."""
        books: list[QuotaBook | CountQuota | None] = [
            self.queries, self.events, self.erasures, self.cube_memories,
            self.sessions_consolidating]
        return {b.quota: b for b in books if b is not None}


def queries_quota(s: Settings) -> QuotaBook:
    """The quota of queries per tenant: the defaults, and each tenant's override."""
    q = s.quotas
    overrides = {t: Limit(o.queries_per_s if o.queries_per_s is not None else q.queries_per_s,
                          o.queries_burst if o.queries_burst is not None else q.queries_burst)
                 for t, o in q.tenant_overrides.items()}
    return QuotaBook("queries", Limit(q.queries_per_s, q.queries_burst), overrides,
                     max_tenants=q.max_tenants)


def events_quota(s: Settings) -> QuotaBook | None:
    """The quota of chat events into ingest per tenant; None when no tenant has a limit."""
    q = s.quotas
    overrides = {t: Limit(o.events_per_s if o.events_per_s is not None else q.events_per_s,
                          o.events_burst if o.events_burst is not None else q.events_burst)
                 for t, o in q.tenant_overrides.items()}
    default = Limit(q.events_per_s, q.events_burst)
    if default.unlimited and all(limit.unlimited for limit in overrides.values()):
        return None
    action = {"delay": DELAYED, "dead_letter": DEAD_LETTERED}
    return QuotaBook("events", default, overrides, max_tenants=q.max_tenants,
                     refused_as=action[q.events_over_quota],
                     refused_as_for={t: action[o.events_over_quota]
                                     for t, o in q.tenant_overrides.items()
                                     if o.events_over_quota is not None})


def events_may_delay(book: QuotaBook) -> bool:
    """Whether some tenant's chat events over the quota of ``book`` are held back."""
    delays = delays_events(book)
    tenants = {*book.overrides, *book.refused_as_for}
    return any(delays(t) for t in tenants) or (
        book.refused_as == DELAYED and not book.default.unlimited)


def delays_events(book: QuotaBook) -> Callable[[str], bool]:
    """Whether a tenant's chat events over the quota of ``book`` are held back and
    taken in later (``delay``), rather than dead-lettered."""
    return lambda tenant: (book.over_quota(tenant) == DELAYED
                           and not book.limit(tenant).unlimited)


def erasures_quota(s: Settings) -> QuotaBook:
    """The quota of erasure requests per tenant, a minute."""
    q = s.quotas

    def limit(per_min: float, burst: int) -> Limit:
        return Limit(per_min / 60.0, burst)

    overrides = {t: limit(o.erasures_per_min if o.erasures_per_min is not None
                          else q.erasures_per_min,
                          o.erasures_burst if o.erasures_burst is not None else q.erasures_burst)
                 for t, o in q.tenant_overrides.items()}
    return QuotaBook("erasures", limit(q.erasures_per_min, q.erasures_burst), overrides,
                     max_tenants=q.max_tenants, unit_s=60.0)


def process_quotas(s: Settings) -> Quotas:
    q, c = s.quotas, s.consolidation
    o = q.tenant_overrides
    return Quotas(
        queries=queries_quota(s),
        load=LoadShare(q.overload_lag_s, max_tenants=q.max_tenants),
        events=events_quota(s),
        erasures=erasures_quota(s),
        cube_memories=CountQuota(
            "cube_memories", q.memories_per_cube,
            {t: v.memories_per_cube for t, v in o.items() if v.memories_per_cube is not None},
            max_tenants=q.max_tenants),
        sessions_consolidating=CountQuota(
            "sessions_consolidating", c.tenant_share,
            {t: v.sessions_consolidating for t, v in o.items()
             if v.sessions_consolidating is not None}, max_tenants=q.max_tenants,
            effective=lambda n: tenant_share(c.concurrency, n)),
        retention=RetentionLimits(
            max_age_days=c.episode_max_age_days or 0.0,
            max_per_cube=c.episodes_max_per_cube or 0,
            age_overrides={t: v.episode_max_age_days for t, v in o.items()
                           if v.episode_max_age_days is not None},
            count_overrides={t: v.episodes_max_per_cube for t, v in o.items()
                             if v.episodes_max_per_cube is not None}))
