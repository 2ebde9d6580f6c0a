"""EpisodeRetention: episodes beyond their tenant's limits expired, once folded into
their conversation's summary.

Off unless ``consolidation.episode_max_age_days`` or
``consolidation.episodes_max_per_cube`` is set (or a tenant's override in
``quotas.tenant_overrides``). Run on the leader, one pass at a time: a pass reads
one page of at most ``chunk`` valid episodes (:class:`~.ports.EpisodeScan`, in id
order, going on after the last page's end and starting over at the first episode
once past the last), decides with :func:`~.rules.episode_retention.to_retire`, and
expires those that go through the provider, a call per cube, ``superseded_by`` =
``summary``: the provider's own expiry, so searches, caches and erasures see them
as any superseded memory (out of every search, the row kept as history until an
erasure deletes it). The provider retires only rows still valid: an episode an
erasure deleted after the page was read is not written again, and an erasure after
the expiry deletes the expired row as any other. Each expired episode is counted in
``memstream_episodes_retired_total{tenant,reason}``.

Only the built-in provider's episodes (route ``mysql``) are aged out; those of
MemOS and Mem0 are left to those services.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime

from streams.consolidation.ports import EpisodeScan
from streams.consolidation.rules.episode_retention import RetentionLimits, to_retire
from streams.memory.provider import Scope
from streams.memory.registry import ProviderRegistry
from streams.metrics import EPISODES_RETIRED

log = logging.getLogger(__name__)
FOLDED_INTO = "summary"  # ``superseded_by`` of an episode the retention expired
BUILTIN = "mysql"


class EpisodeRetention:
    def __init__(self, scan: EpisodeScan, registry: ProviderRegistry, limits: RetentionLimits,
                 *, chunk: int = 1000, clock: Callable[[], float] = time.time) -> None:
        self.scan = scan
        self.registry = registry
        self.limits = limits
        self.chunk = chunk
        self.clock = clock
        self.after_id = 0  # where the next pass goes on

    @property
    def enabled(self) -> bool:
        return self.limits.enabled and BUILTIN in self.registry.configured()

    async def run(self) -> dict[tuple[str, str], int]:
        """One pass; the episodes expired, by (tenant, reason)."""
        if not self.enabled:
            return {}
        episodes, last = await self.scan.page(self.after_id, self.chunk)
        self.after_id = last or 0
        now = datetime.fromtimestamp(self.clock(), UTC)
        by_cube: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
        counts: Counter[tuple[str, str]] = Counter()
        for e, reason in to_retire(episodes, self.limits, now):
            by_cube[(e.tenant_id, e.user_id, e.agent_id, e.cube)].append(e.memory_id)
            counts[(e.tenant_id, reason)] += 1
        provider = self.registry.get(BUILTIN).provider
        for (tenant, user, agent, cube), ids in by_cube.items():
            await provider.expire(Scope(tenant, user, agent), cube, ids, FOLDED_INTO)
        for (tenant_id, why), n in counts.items():
            EPISODES_RETIRED.labels(tenant_id, why).inc(n)
        if counts:
            log.info("episode retention: expired %s", dict(counts))
        return dict(counts)
